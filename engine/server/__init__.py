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

from typing import TYPE_CHECKING

from promptcache.lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
