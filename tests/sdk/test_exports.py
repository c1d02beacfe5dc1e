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


def test_import_loads_no_optional_or_heavy_library() -> None:
    # Encoders, SQLite helpers, rich and vendor clients load on first use, not on import.
    import subprocess
    import sys

    code = (
        "import sys, promptcache\n"
        "heavy = ['tiktoken', 'tokenizers', 'sqlite_utils', 'rich', 'anthropic', 'openai']\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_import_loads_no_sdk_module_until_a_name_is_used() -> None:
    # The engine's and the proxy's processes import promptcache (for promptcache.errors) and
    # should not pay for the SDK's modules (about 4 MiB of RSS beside the engine).
    import subprocess
    import sys

    code = (
        "import sys, promptcache, promptcache.errors\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('promptcache.'))))\n"
        "promptcache.Conversation\n"
        "print('promptcache.conversation' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["promptcache.errors,promptcache.lazy", "True"]
