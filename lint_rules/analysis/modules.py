"""Module names of the files of one run, and resolution of qualified names to them.

A file's module name is the one Python would give it: the chain of enclosing packages (folders
with ``__init__.py``) plus its stem (``app/prompts/context.py`` -> ``app.prompts.context`` when
``app/`` and ``app/prompts/`` are packages). A file outside any package is a top-level module
named by its stem, as when its folder is on ``sys.path`` (a script folder).

A file under a source root is also importable by its dotted path from that root, as Python
imports a namespace package (a folder without ``__init__.py``) from a ``sys.path`` entry:

- the run's root, and the folder of each ``pyproject.toml`` at or below it (a monorepo's
  ``libs/x/``): ``tests/helpers.py`` -> ``tests.helpers``;
- a folder named ``src`` that is not itself a package: ``src/pkg/utils.py`` -> ``pkg.utils``;
- the folders a ``pyproject.toml`` names: ``[tool.setuptools.package-dir]`` (``"pkg" =
  "src/pkg"`` makes ``src/pkg/utils.py`` ``pkg.utils``; ``"" = "lib"`` makes ``lib/`` a root),
  ``[tool.setuptools.packages.find] where``, poetry's ``packages = [{include, from}]`` and
  hatch's ``[tool.hatch.build.targets.wheel] packages``.

The last two kinds are package roots: a file inside a folder below one is in a package, so its
stem (or a package chain that starts below the root) is not a name of it, and its module name
is the one from the root (``pkg.utils``, for relative imports and class names). A name that two
files claim resolves to the one in the importer's own folder, or to none (never to a guess).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: (folder, package prefix, is a package root) -- a folder whose files are importable by their
#: dotted path from it, under ``prefix``
Root = tuple[str, str, bool]


@lru_cache(maxsize=4096)
def _is_package_dir(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "__init__.py"))


def module_name(path: str, absolute: str | None = None) -> tuple[str, bool]:
    """(dotted module name, is a package ``__init__``) of a Python file, from its packages
    (``absolute``: ``path`` made absolute, when the caller has it)."""
    if absolute is None:
        absolute = os.path.abspath(path)
    folder, filename = os.path.split(absolute)
    stem = filename.rsplit(".", 1)[0]
    is_package = stem == "__init__"
    parts = [] if is_package else [stem]
    if is_package:
        parts.append(os.path.basename(folder))
        folder = os.path.dirname(folder)
    while _is_package_dir(folder) and os.path.dirname(folder) != folder:
        parts.append(os.path.basename(folder))
        folder = os.path.dirname(folder)
    parts.reverse()
    return ".".join(p for p in parts if p.isidentifier()) or stem, is_package


def _table(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _folder(base: str, rel: object) -> str | None:
    """``base``/``rel`` for a relative folder name in a pyproject.toml, else None."""
    if not isinstance(rel, str) or os.path.isabs(rel):
        return None
    return os.path.normpath(os.path.join(base, rel))


def _valid_prefix(prefix: object) -> bool:
    return isinstance(prefix, str) and (
        prefix == "" or all(p.isidentifier() for p in prefix.split("."))
    )


@lru_cache(maxsize=256)
def _pyproject_roots(folder: str) -> tuple[Root, ...]:
    """The source roots the ``pyproject.toml`` in ``folder`` declares (none when it has none
    or cannot be read): its own folder, and the package roots of setuptools, poetry, hatch."""
    path = os.path.join(folder, "pyproject.toml")
    if not os.path.isfile(path):
        return ()
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return ()  # RecursionError: arrays or tables nested too deeply for tomllib
    roots: list[Root] = [(folder, "", False)]
    package_dir = _table(data, "tool", "setuptools", "package-dir")
    if isinstance(package_dir, dict):
        for prefix, rel in package_dir.items():
            target = _folder(folder, rel)
            if target is not None and _valid_prefix(prefix):
                roots.append((target, prefix, True))
    where = _table(data, "tool", "setuptools", "packages", "find", "where")
    for rel in where if isinstance(where, list) else ():
        target = _folder(folder, rel)
        if target is not None:
            roots.append((target, "", True))
    poetry = _table(data, "tool", "poetry", "packages")
    for entry in poetry if isinstance(poetry, list) else ():
        target = _folder(folder, _table(entry, "from"))
        if target is not None:
            roots.append((target, "", True))
    hatch = _table(data, "tool", "hatch", "build", "targets", "wheel", "packages")
    for rel in hatch if isinstance(hatch, list) else ():
        target = _folder(folder, rel)
        if target is not None and os.path.basename(target).isidentifier():
            roots.append((target, os.path.basename(target), True))
    # a root that is the project's own folder is where scripts live too, not a package root
    return tuple(
        (target, prefix, strong and not (target == folder and not prefix))
        for target, prefix, strong in roots
    )


def source_roots(folders: Iterable[str], top: str) -> list[Root]:
    """The source roots (see the module docstring) among ``top`` and the folders between it
    and each of ``folders`` (absolute paths at or below ``top``), ``top`` first."""
    found: dict[tuple[str, str], bool] = {(top, ""): False}
    seen: set[str] = set()
    for start in folders:
        folder = start
        while folder not in seen:
            seen.add(folder)
            for target, prefix, strong in _pyproject_roots(folder):
                found[(target, prefix)] = found.get((target, prefix), False) or strong
            if os.path.basename(folder) == "src" and not _is_package_dir(folder):
                found[(folder, "")] = True
            if folder == top:
                break
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return [(target, prefix, strong) for (target, prefix), strong in found.items()]


def _project_top(folder: str) -> str:
    """The nearest folder at or above ``folder`` that holds ``.git`` or a ``pyproject.toml``
    (``folder`` itself when none does)."""
    current = folder
    while True:
        if os.path.exists(os.path.join(current, ".git")) or os.path.isfile(
            os.path.join(current, "pyproject.toml")
        ):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return folder
        current = parent


def relative_path(path: str, folder: str) -> str:
    """``os.path.relpath(path, folder)`` for an absolute, normalised ``path``
    (``os.path.abspath``'s). A path below the folder is cut from its text: a normalised path
    that starts with ``folder`` and a separator has that folder's own normalised path there
    (``relpath`` makes both absolute and walks their parts, much slower over a large tree's
    files and roots)."""
    start = folder + os.sep
    if path.startswith(start) and len(path) > len(start):
        return path[len(start) :]
    return os.path.relpath(path, folder)


def _dotted(path: str, root: str, prefix: str) -> str | None:
    """``path``'s module name as imported from ``root`` under ``prefix``, if it is below
    ``root`` and every part is an identifier. ``path`` is absolute and normalised."""
    rel = relative_path(path, root)
    if rel.startswith(".."):
        return None
    rel = rel[: -len(".py")] if rel.endswith(".py") else rel
    parts = rel.split(os.sep)
    if parts[-1] == "__init__":
        parts.pop()
    if prefix:
        parts = [*prefix.split("."), *parts]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


@dataclass
class ModuleIndex:
    """Which file defines which module name (its package name and those from source roots).

    ``names``: file -> (module name, is package); ``files``: module name -> files claiming it.
    """

    names: dict[str, tuple[str, bool]] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)
    #: (absolute folder, stem) -> file, built on first use by ``_sibling``
    _by_folder: dict[tuple[str, str], str] | None = field(default=None, repr=False)
    #: (qualified name, importer) -> ``split``'s answer: the program driver resolves the
    #: same names of the same files in every wave of the fixpoint (about 40,000 times on
    #: deepagents' 422 files, most of a warm run's planning), each time walking the prefixes
    #: with a path made absolute and a package folder looked up on disk
    _splits: dict[tuple[str, str], tuple[str, str] | None] = field(default_factory=dict, repr=False)
    #: file -> its absolute folder (``_folder``): a new name's ``split`` asks it of the
    #: importer and of each file claiming a prefix, and each ``abspath`` reads the cwd
    _folders: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, paths: Iterable[str], root: Path) -> ModuleIndex:
        index = cls()
        paths = list(paths)
        absolute = {path: os.path.abspath(path) for path in paths}
        # the absolute folders, kept for ``_folder`` and ``_sibling``
        index._folders = {path: os.path.dirname(a) for path, a in absolute.items()}
        top = os.path.abspath(root)
        outside = [a for a in absolute.values() if relative_path(a, top).startswith("..")]
        roots = source_roots(
            sorted({os.path.dirname(a) for a in absolute.values() if a not in outside}), top
        )
        if outside:  # files outside the run's root: named from their own project's top
            other = _project_top(os.path.commonpath([os.path.dirname(a) for a in outside]))
            roots += source_roots(sorted({os.path.dirname(a) for a in outside}), other)
        for path in paths:
            chain, is_package = module_name(path, absolute[path])
            from_roots = {
                dotted: strong
                for target, prefix, strong in roots
                if (dotted := _dotted(absolute[path], target, prefix)) is not None
            }
            # a package root's name that extends the package chain (``pkg.utils`` for a stem
            # ``utils``) is the file's name; the shorter chain is then no name of it
            longer = [
                name for name, strong in from_roots.items() if strong and name.endswith("." + chain)
            ]
            name = max(longer, key=lambda n: (len(n), n)) if longer else chain
            index.names[path] = (name, is_package)
            claimed = {name, *from_roots}
            if not longer:
                claimed.add(chain)
            for dotted in sorted(claimed):
                index.files.setdefault(dotted, []).append(path)
        return index

    def file_of(self, module: str, importer: str) -> str | None:
        """The file of ``module`` as seen from ``importer`` (a path), or None.

        A top-level name no file claims is the importer's sibling ``<module>.py`` when the
        importer's folder is not a package and the name is not the standard library's: a
        script run as ``python src/tools/app.py`` imports ``clock`` from ``src/tools/``,
        which the source root ``src`` names ``tools.clock``.
        """
        candidates = self.files.get(module)
        if not candidates:
            return self._sibling(module, importer)
        unique = sorted(set(candidates))
        if len(unique) == 1:
            return unique[0]
        here = self._folder(importer)
        local = [c for c in unique if self._folder(c) == here]
        return local[0] if len(local) == 1 else None

    def _folder(self, path: str) -> str:
        """The absolute folder of ``path``, kept per path for the run."""
        folder = self._folders.get(path)
        if folder is None:
            folder = self._folders[path] = os.path.dirname(os.path.abspath(path))
        return folder

    def _sibling(self, module: str, importer: str) -> str | None:
        if "." in module or module in sys.stdlib_module_names:
            return None
        here = self._folder(importer)
        if _is_package_dir(here):
            return None
        if self._by_folder is None:
            by_folder: dict[tuple[str, str], str] = {}
            for path in self.names:
                filename = os.path.basename(path)
                if filename.endswith(".py"):
                    by_folder.setdefault((self._folder(path), filename[: -len(".py")]), path)
            self._by_folder = by_folder
        return self._by_folder.get((here, module))

    def split(self, qual: str, importer: str) -> tuple[str, str] | None:
        """``app.prompts.context.current_context`` -> (defining file, ``current_context``):
        the longest module prefix that is a file of the run, and the rest of the name. Kept
        per (``qual``, ``importer``): the index's files do not change during a run."""
        key = (qual, importer)
        if key in self._splits:
            return self._splits[key]
        parts = qual.split(".")
        out: tuple[str, str] | None = None
        for cut in range(len(parts) - 1, 0, -1):
            found = self.file_of(".".join(parts[:cut]), importer)
            if found is not None:
                out = found, ".".join(parts[cut:])
                break
        self._splits[key] = out
        return out
