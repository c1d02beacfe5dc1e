"""Which files ``promptcache lint PATH...`` looks at: Python files, minus excludes and .gitignore.

Files and folders named on the command line are always linted: neither ``exclude`` nor a
parent's .gitignore hides a path you name (``force_exclude`` restores ``exclude`` for them, and
leaves out a named file that a folder's walk would leave out, ``walk_leaves_out``).
Inside folders, hidden folders and the usual build, cache and virtualenv folders are skipped
(ruff's default list), and test folders and test files unless asked for; then the config's
``exclude`` patterns (gitignore syntax, relative to the
config file's folder), then whatever ``.gitignore`` files between the repository root and each
file ignore.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import pathspec

from .config import LintConfig

SKIP_DIRS = frozenset(
    {
        "__pycache__",
        "__pypackages__",
        "_build",
        "buck-out",
        "build",
        "dist",
        "node_modules",
        "site-packages",
        "venv",
    }
)
#: folders of tests, left out of a folder's files unless ``include_tests``
TEST_DIRS = frozenset({"tests", "test", "testing"})


def _spec(lines: list[str]) -> pathspec.PathSpec[Any]:
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _special_file(path: Path) -> bool:
    """A FIFO, socket or device named like a Python file (or a link to one): reading it could
    block for ever, so a folder's walk leaves it out. A broken link or a link loop is kept: it
    is reported as PC000, as a file that cannot be read."""
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def _git_root(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return None


def _gitignore_spec(lines: list[str]) -> pathspec.PathSpec[Any]:
    """The spec of a .gitignore's lines. A line pathspec cannot compile (a reversed range such
    as ``[AVC-8bit]``, ``C`` after ``8``) is left out: git's own matcher takes such a pattern
    to match no path, so leaving it out ignores what git ignores, and the other lines still
    apply."""
    try:
        return _spec(lines)
    except (re.error, ValueError):
        kept = []
        for line in lines:
            try:
                _spec([line])
            except (re.error, ValueError):
                continue
            kept.append(line)
        return _spec(kept)


def _read_gitignore(folder: Path) -> pathspec.PathSpec[Any] | None:
    path = folder / ".gitignore"
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return _gitignore_spec(text.splitlines())


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, pathspec.PathSpec[Any]]]) -> bool:
    for base, spec in specs:
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        if spec.match_file(rel + "/" if is_dir else rel):
            return True
    return False


def is_test_path(name: str, is_dir: bool) -> bool:
    """A folder or file name that holds tests (pytest's and unittest's conventions): folders
    ``tests``, ``test`` and ``testing``; files ``test_*.py``, ``*_test.py`` and ``conftest.py``."""
    if is_dir:
        return name in TEST_DIRS
    stem = name.rsplit(".", 1)[0]
    return stem.startswith("test_") or stem.endswith("_test") or stem == "conftest"


def walk_leaves_out(given: Path, root: Path, include_tests: bool) -> str:
    """Why a folder's walk would leave out this file, named on the command line: "folder" when
    a folder on its way is hidden or one of ``SKIP_DIRS``, "test" for a test file or one in a
    test folder (unless ``include_tests``); "" when the walk lints it. The folders are counted
    from ``root``, the config's folder, or else from the current folder, so a project kept
    under a ``test`` or ``build`` folder is not left out whole."""
    named = Path(os.path.abspath(given))
    folders: tuple[str, ...] = ()
    for base in (root.resolve(), Path.cwd()):
        try:
            folders = named.parent.relative_to(base).parts
        except ValueError:
            continue
        break
    if any(part.startswith(".") or part in SKIP_DIRS for part in folders):
        return "folder"
    if include_tests:
        return ""
    if is_test_path(named.name, False) or any(is_test_path(part, True) for part in folders):
        return "test"
    return ""


def discover(
    paths: list[Path],
    config: LintConfig,
    force_exclude: bool = False,
    include_tests: bool = False,
) -> list[Path]:
    """Python files under ``paths``, sorted, without repeats.

    Files given directly are kept, unless ``force_exclude`` (as pre-commit passes every staged
    file): then the config's ``exclude`` applies to them too, and so does what a walk leaves
    out (``walk_leaves_out``), so a hook lints what ``lint .`` lints. Inside folders, test
    folders and test files (``is_test_path``) are left out unless ``include_tests``; a test
    file or folder named on the command line is linted, a test folder with all its files
    (``tests/test_app.py`` for ``lint tests``).
    """
    exclude = [(config.root.resolve(), _spec(list(config.exclude)))] if config.exclude else []
    found: dict[Path, None] = {}
    for given in paths:
        top = given.resolve()
        if top.is_file():
            # pre-commit's staged files: what `lint .` leaves out is left out here too
            if force_exclude and walk_leaves_out(given, config.root, include_tests):
                continue
            if force_exclude and exclude and _ignored(top, False, exclude):
                continue
            found[Path(os.path.abspath(given))] = None  # as named, even if a symlink
            continue
        # a folder named on the command line is linted even if excluded (unless force_exclude)
        named_excluded = bool(exclude) and _ignored(top, True, exclude) and not force_exclude
        initial = [] if named_excluded else list(exclude)
        if config.respect_gitignore:
            root = _git_root(top)
            if root is not None:
                chain = [top, *top.parents]
                parents = []
                for folder in reversed(chain[1 : chain.index(root) + 1]):
                    spec = _read_gitignore(folder)
                    if spec is not None:
                        parents.append((folder, spec))
                # a folder named on the command line is linted even if a parent ignores it
                if not _ignored(top, True, parents):
                    initial.extend(parents)
        inherited: dict[Path, list[tuple[Path, pathspec.PathSpec[Any]]]] = {top: initial}
        # a test folder named on the command line is linted whole: its files are tests too
        tests_here = include_tests or is_test_path(top.name, True)
        for dirpath, dirnames, filenames in os.walk(top):
            folder = Path(dirpath)
            specs = inherited.pop(folder, initial)
            if config.respect_gitignore and ".gitignore" in filenames:
                spec = _read_gitignore(folder)
                if spec is not None:
                    specs = [*specs, (folder, spec)]
            dirnames[:] = sorted(
                d
                for d in dirnames
                if not d.startswith(".")
                and d not in SKIP_DIRS
                and (tests_here or not is_test_path(d, True))
                and not _ignored(folder / d, True, specs)
            )
            for child in dirnames:
                inherited[folder / child] = specs
            for name in filenames:
                if name.endswith((".py", ".pyi")) and (tests_here or not is_test_path(name, False)):
                    path = folder / name
                    if _special_file(path):
                        continue
                    if not specs or not _ignored(path, False, specs):
                        found[path] = None
    return sorted(found)
