"""Loaded by Python at start-up because ``promptcache check`` puts this folder first on the
child's ``PYTHONPATH``: installs the check hook (``promptcache/check/child.py``, loaded by file
path so the child needs no promptcache install), then runs the ``sitecustomize`` this one
shadows, if there is one further along ``sys.path``."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType


def _load(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.origin and os.path.dirname(spec.origin) != here:
        _load("_promptcache_check_chained_sitecustomize", spec.origin)


_CHILD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "child.py")
if __name__ == "sitecustomize":  # at start-up only, not when imported as a package module
    _load("_promptcache_check_child", _CHILD).install()
    _chain()
