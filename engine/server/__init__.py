"""OpenAI-compatible HTTP server for the bundled engine (``promptcache engine serve``).

One ``LLMEngine`` runs on a background thread (``AsyncEngine``) beside the asyncio event loop
that Starlette and uvicorn serve on; see docs/engine-server.md.

Example::

    from promptcache.engine import LLMEngine
    from promptcache.engine.server import create_app, serve

    engine = LLMEngine.from_pretrained("path/to/checkpoint", kv_cache_bytes=512 * 2**20)
    serve(create_app(engine, served_model_names=["my-model"]), port=8000)
"""

from __future__ import annotations

from .app import create_app
from .async_engine import AsyncEngine, RequestStream
from .run import serve

__all__ = ["AsyncEngine", "RequestStream", "create_app", "serve"]
