"""Names a package loads on first use (PEP 562), so importing the package stays cheap.

``promptcache.engine`` and ``promptcache.engine.server`` list their public names with the module
each lives in; nothing heavy (torch, starlette) is imported until a name is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module-level ``__getattr__`` and ``__dir__`` for ``package``.

    Args:
        package: the package's ``__name__``.
        where: public name -> the module that defines it, relative to ``package`` (``".llm"``).

    Returns:
        ``(__getattr__, __dir__)``: the first imports the name's module on first use and keeps
        the value in the package (so later lookups are plain attribute reads); it raises
        ``AttributeError`` for a name not in ``where``, and ``ImportError`` naming the module
        and the cause when the module's own import fails with an ``AttributeError``.
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            loaded = importlib.import_module(module, package)
        except AttributeError as exc:
            # raised by the module's own import (a local struct.py shadowing the standard
            # library's, a circular import): left an AttributeError, Python would say "cannot
            # import name" of a name that exists and drop the cause
            raise ImportError(
                f"cannot load {package}.{name}: importing "
                f"{importlib.util.resolve_name(module, package)} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        value = getattr(loaded, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
