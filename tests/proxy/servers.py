"""Run an ASGI app under a real uvicorn server on 127.0.0.1 in a background thread (tests only).

Reusable by any test that needs a live HTTP server: ``with ServerThread(app) as server:`` then
talk to ``server.url``. The port is a free one picked by the OS; leaving the block stops the
server and runs the app's lifespan shutdown (for the proxy: the log writer is drained).
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn
from starlette.types import ASGIApp


class ServerThread:
    """A uvicorn server for ``app`` on ``127.0.0.1:<free port>``, started on ``__enter__``."""

    def __init__(self, app: ASGIApp, *, graceful_shutdown_s: float = 5.0, **settings: Any) -> None:
        """``settings``: more ``uvicorn.Config`` options (``timeout_keep_alive``...)."""
        self.app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            server_header=False,
            date_header=False,
            timeout_graceful_shutdown=graceful_shutdown_s,
            **settings,
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"test server on {self.url} did not start")
            time.sleep(0.005)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving, run lifespan shutdown and wait for the thread."""
        self.server.should_exit = True
        self._thread.join(30)
        self._sock.close()


async def read_body(receive: Any) -> bytes:
    """The whole request body of an ASGI ``http`` scope, joined from its ``http.request``
    messages (``receive`` is the app's receive callable)."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body
