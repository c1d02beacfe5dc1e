"""Fixtures shared by every test folder: ``chromium`` and ``devtools``, real headless Chromium.

The classes are in browser_support.py (importable from any test folder, as this file's folder is
on ``sys.path``). Chromium is required: without it a test using these fixtures fails and says how
to install it (``make browser`` does), unless ``PROMPTCACHE_SKIP_BROWSER=1`` is set.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The checkout's top-level ``kernels/`` folder (installed as ``promptcache.kernels``) would shadow
# the ``kernels`` distribution that transformers >= 5.25 imports, had the checkout's root been put
# on ``sys.path`` (``python -m pytest`` puts the working directory there; ``pytest`` does not).
# Tests import promptcache from the installed package, so the root is never needed on the path.
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != _ROOT]

from browser_support import Chromium, DevTools  # noqa: E402


@functools.cache
def _binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture
def chromium(tmp_path: Path) -> Chromium:
    """Headless Chromium (see the module docstring); fails, or skips with
    ``PROMPTCACHE_SKIP_BROWSER=1``, when none is installed."""
    binary = _binary()
    if binary is None:
        if os.environ.get("PROMPTCACHE_SKIP_BROWSER") == "1":
            pytest.skip("PROMPTCACHE_SKIP_BROWSER=1 and no chromium on PATH")
        pytest.fail(
            "headless Chromium is needed to check the HTML report: install it with "
            "`apt-get install -y chromium` (Debian/Ubuntu; `make browser` does), or set "
            "PROMPTCACHE_SKIP_BROWSER=1 to skip"
        )
    return Chromium(binary, tmp_path)


@pytest.fixture
def devtools(chromium: Chromium, tmp_path: Path) -> Iterator[DevTools]:
    """A :class:`DevTools` session on a fresh profile, closed after the test."""
    session = DevTools(chromium.binary, tmp_path / "devtools-profile")
    try:
        yield session
    finally:
        session.close()
