"""The SSE encoder's framing, and the event-stream response noticing a silent disconnect."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator

import httpx
import pytest
from server_support import LiveServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from promptcache.engine.server.sse import DONE_EVENT, EventStreamResponse, encode_event


def test_every_event_is_compact_json_and_a_blank_line() -> None:
    event = encode_event({"text": "héllo\nworld", "n": [1, 2]})
    assert event.startswith(b"data: ") and event.endswith(b"\n\n")
    assert event.count(b"\n") == 2  # a newline inside the text stays escaped
    assert json.loads(event[len(b"data: ") : -2]) == {"text": "héllo\nworld", "n": [1, 2]}
    assert DONE_EVENT == b"data: [DONE]\n\n"
    with pytest.raises(ValueError):
        encode_event({"x": float("nan")})  # never emit invalid JSON


def test_disconnect_before_the_first_event_cancels_the_stream_and_runs_on_close() -> None:
    closed = threading.Event()
    cancelled = threading.Event()

    async def silent() -> AsyncIterator[bytes]:
        try:
            await asyncio.sleep(3600)  # e.g. a request still queued for its first token
            yield b""
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def endpoint(request: Request) -> EventStreamResponse:
        return EventStreamResponse(silent(), on_close=closed.set)

    app = Starlette(routes=[Route("/stream", endpoint)])
    with LiveServer(app) as live:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(f"{live.url}/stream", timeout=httpx.Timeout(10, read=0.2))
        assert closed.wait(10), "on_close did not run after the client left"
        assert cancelled.wait(10), "the body iterator was not cancelled"
