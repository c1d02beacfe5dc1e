"""Run mypy over the installed layout of promptcache, naming the real source files in its output.

The distribution maps folders to import names (`[tool.setuptools.package-dir]` in pyproject.toml:
`proxy/` installs as `promptcache.proxy`, `engine/` as `promptcache.engine`, ...). mypy cannot read
that mapping (an editable install maps it with an import hook, which mypy does not run), so on its
own it would see `proxy/store.py` as module `proxy.store` and every `promptcache.proxy` import
as missing. This script builds the layout mypy needs, in the spirit of setuptools' strict editable
mode: `build/typecheck/promptcache/<name>` is a symlink to each mapped folder, and pyproject's
`[tool.mypy]` lists those links in `files` with `build/typecheck` on `mypy_path`. The SDK itself
(`promptcache/`) is checked in place. The links point at folders, so edits and new files inside
a folder need no rebuild; the script rebuilds the links on every run anyway (cheap).

mypy prints the link paths (`build/typecheck/promptcache/proxy/store.py`); this script rewrites
them back to the files you edit (`proxy/store.py`).

Usage (from the repository root; `make test` runs it):

    .venv/bin/python tools/typecheck.py [MYPY_ARGS...]

Once the links exist, plain `.venv/bin/mypy` works too, naming files under build/typecheck/.
Exit status: mypy's; 2 if pyproject's `[tool.mypy] files` does not list every mapped folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
TREE = Path("build") / "typecheck"
PACKAGE = "promptcache"


def package_dirs(pyproject: Path) -> dict[str, str]:
    """Mapped sub-packages of `pyproject`'s `[tool.setuptools.package-dir]`.

    Returns {"proxy": "proxy", "engine": "engine", ...}: the name under `promptcache` to the folder
    relative to the repository root. The top package itself (`promptcache` -> `promptcache/`) is
    left out: mypy checks it in place.
    """
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    prefix = PACKAGE + "."
    return {
        name.removeprefix(prefix): folder
        for name, folder in mapping.items()
        if name.startswith(prefix)
    }


def build_tree(root: Path, mapping: dict[str, str]) -> Path:
    """Create `root/build/typecheck/promptcache/<name>` -> `root/<folder>` links; return the tree.

    Links are relative, so the checkout can move. Links the mapping no longer names are removed.
    Raises OSError where the file system cannot hold symlinks.
    """
    package = root / TREE / PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    for entry in package.iterdir():
        if entry.name not in mapping and entry.is_symlink():
            entry.unlink()
    for name, folder in mapping.items():
        link = package / name
        target = os.path.relpath(root / folder, package)
        if link.is_symlink() and os.readlink(link) == target:
            continue
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)
    return root / TREE


def missing_files(pyproject: Path, mapping: dict[str, str]) -> list[str]:
    """Link folders that `[tool.mypy] files` does not list (so mypy would skip a mapped folder)."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    listed = {os.path.normpath(f) for f in config["tool"]["mypy"]["files"]}
    wanted = [os.path.join(TREE, PACKAGE, name) for name in mapping]
    return [w for w in wanted if os.path.normpath(w) not in listed]


def real_path(line: str, mapping: dict[str, str]) -> str:
    """`line` of mypy output with each link path replaced by the mapped folder's path.

    `build/typecheck/promptcache/proxy/store.py:3: error: ...` -> `proxy/store.py:3: error: ...`.
    """
    for name, folder in mapping.items():
        link = f"{TREE.as_posix()}/{PACKAGE}/{name}/"
        line = line.replace(link, f"{Path(folder).as_posix()}/")
    return line


def main(argv: list[str]) -> int:
    """Build the links, run `python -m mypy argv...` in the repository root, rewrite its output."""
    pyproject = ROOT / "pyproject.toml"
    mapping = package_dirs(pyproject)
    build_tree(ROOT, mapping)
    missing = missing_files(pyproject, mapping)
    if missing:
        print(
            "pyproject.toml [tool.mypy] files must list every folder mapped in "
            f"[tool.setuptools.package-dir]; add: {', '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    proc = subprocess.Popen(
        [sys.executable, "-m", "mypy", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(real_path(line, mapping))
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
