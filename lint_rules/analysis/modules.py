"""Module names of the files of one run, and resolution of qualified names to them.

A file's module name is the one Python would give it: the chain of enclosing packages (folders
with ``__init__.py``) plus its stem (``app/prompts/context.py`` -> ``app.prompts.context`` when
``app/`` and ``app/prompts/`` are packages). A file outside any package is a top-level module
named by its stem, as when its folder is on ``sys.path`` (a script folder, ``src/``). Each file
is also indexed by its dotted path from the run's root (``tests/helpers.py`` ->
``tests.helpers``), for namespace packages. A name that two files claim resolves to the one in
the importer's own folder, or to none (never to a guess).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=4096)
def _is_package_dir(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "__init__.py"))


def module_name(path: str) -> tuple[str, bool]:
    """(dotted module name, is a package ``__init__``) of a Python file, from its packages."""
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


@dataclass
class ModuleIndex:
    """Which file defines which module name (both the package name and the root-relative one).

    ``names``: file -> (module name, is package); ``files``: module name -> files claiming it.
    """

    names: dict[str, tuple[str, bool]] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, paths: Iterable[str], root: Path) -> ModuleIndex:
        index = cls()
        root_abs = os.path.abspath(root)
        for path in paths:
            name, is_package = module_name(path)
            index.names[path] = (name, is_package)
            index.files.setdefault(name, []).append(path)
            rel = os.path.relpath(os.path.abspath(path), root_abs)
            if not rel.startswith(".."):
                dotted = rel[: -len(".py")] if rel.endswith(".py") else rel
                dotted = dotted.replace(os.sep, ".")
                if dotted.endswith(".__init__"):
                    dotted = dotted[: -len(".__init__")]
                if dotted != name and all(p.isidentifier() for p in dotted.split(".")):
                    index.files.setdefault(dotted, []).append(path)
        return index

    def file_of(self, module: str, importer: str) -> str | None:
        """The file of ``module`` as seen from ``importer`` (a path), or None."""
        candidates = self.files.get(module)
        if not candidates:
            return None
        unique = sorted(set(candidates))
        if len(unique) == 1:
            return unique[0]
        here = os.path.dirname(os.path.abspath(importer))
        local = [c for c in unique if os.path.dirname(os.path.abspath(c)) == here]
        return local[0] if len(local) == 1 else None

    def split(self, qual: str, importer: str) -> tuple[str, str] | None:
        """``app.prompts.context.current_context`` -> (defining file, ``current_context``):
        the longest module prefix that is a file of the run, and the rest of the name."""
        parts = qual.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            found = self.file_of(".".join(parts[:cut]), importer)
            if found is not None:
                return found, ".".join(parts[cut:])
        return None
