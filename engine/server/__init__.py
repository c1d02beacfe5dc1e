"""OpenAI-compatible HTTP server for the bundled engine (``promptcache engine serve``).

One ``LLMEngine`` runs on a background thread (``AsyncEngine``) beside the asyncio event loop
that Starlette and uvicorn serve on; see docs/engine-server.md.

Example::

    from promptcache.engine import LLMEngine
    from promptcache.engine.server import create_app, serve

    engine = LLMEngine.from_pretrained("path/to/checkpoint", kv_cache_bytes=512 * 2**20)
    serve(create_app(engine, served_model_names=["my-model"]), port=8000)

Names load on first use (PEP 562), so ``promptcache.engine.server.protocol`` (request parsing
and tokenisation, which the proxy's ``kv_events`` routing reuses) imports no torch or starlette.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .async_engine import AsyncEngine, RequestStream
    from .run import serve

__all__ = ["AsyncEngine", "RequestStream", "create_app", "serve"]

_WHERE = {
    "AsyncEngine": ".async_engine",
    "RequestStream": ".async_engine",
    "create_app": ".app",
    "serve": ".run",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
