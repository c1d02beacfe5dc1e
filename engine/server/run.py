"""Run the app with uvicorn (one process, one engine thread)."""

from __future__ import annotations

from starlette.applications import Starlette

__all__ = ["serve"]


def serve(
    app: Starlette, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info"
) -> None:
    """Serve ``app`` until interrupted (Ctrl-C stops the engine thread cleanly).

    One uvicorn worker only: the engine, its KV pool and its prefix cache live in this process.
    """
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level=log_level, workers=1)
