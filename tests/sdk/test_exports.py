"""The public namespace: ``promptcache.__all__`` is sorted, unique and fully importable."""

from __future__ import annotations

import importlib
from pathlib import Path

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


def test_a_module_that_fails_to_load_is_said_not_hidden_as_a_missing_name(tmp_path: Path) -> None:
    # An AttributeError inside the module's own import (a script named struct.py beside the
    # user's code shadows the standard library's: "partially initialized module 'struct' has no
    # attribute 'calcsize'") left the lazy __getattr__ as an AttributeError, which Python shows
    # as "cannot import name 'PromptBuilder' from 'promptcache'": a name that exists, said
    # missing, and the real cause gone.
    import subprocess
    import sys

    pkg = tmp_path / "lazypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from promptcache.lazy import lazy_exports\n"
        "__getattr__, __dir__ = lazy_exports(__name__, {'Thing': '.broken'})\n",
        encoding="utf-8",
    )
    (pkg / "broken.py").write_text(
        "import lazypkg.helper as helper\nThing = helper.calcsize\n", encoding="utf-8"
    )
    (pkg / "helper.py").write_text("size = 4\n", encoding="utf-8")
    said = (
        "ImportError: cannot load lazypkg.Thing: importing lazypkg.broken failed: "
        "AttributeError: module 'lazypkg.helper' has no attribute 'calcsize'"
    )
    for code in ("from lazypkg import Thing", "import lazypkg; lazypkg.Thing"):
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines()[-1] == said
    # a name that is not exported is still the plain AttributeError (hasattr() is False)
    proc = subprocess.run(
        [sys.executable, "-c", "import lazypkg; print(hasattr(lazypkg, 'Other'))"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert proc.stdout == "False\n"
