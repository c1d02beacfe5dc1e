"""The public namespace: ``promptcache.__all__`` is sorted, unique and fully importable."""

from __future__ import annotations

import importlib

import promptcache


def test_all_is_sorted_and_unique() -> None:
    assert promptcache.__all__ == sorted(set(promptcache.__all__))


def test_every_exported_name_is_importable() -> None:
    missing = [name for name in promptcache.__all__ if not hasattr(promptcache, name)]
    assert missing == [], f"in __all__ but not importable from promptcache: {missing}"


def test_exported_objects_come_from_their_defining_module() -> None:
    # Each re-exported class/function is the same object as in its home module (no copies).
    for name in promptcache.__all__:
        obj = getattr(promptcache, name)
        module_name = getattr(obj, "__module__", None)
        if module_name and module_name.startswith("promptcache."):
            assert getattr(importlib.import_module(module_name), name, obj) is obj, name
