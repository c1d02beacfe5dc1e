"""Server-sent events: the one encoder every streamed event goes through, and its response.

Framing (https://html.spec.whatwg.org/multipage/server-sent-events.html, and OpenAI's streaming
format https://platform.openai.com/docs/api-reference/chat-streaming, checked 2026-11-30): each
event is ``data: <compact JSON>`` followed by a blank line; the stream ends with the literal
``data: [DONE]`` event, the only non-JSON payload, as OpenAI sends it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterable, Callable, Mapping
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

__all__ = ["DONE_EVENT", "EventStreamResponse", "encode_event"]

DONE_EVENT = b"data: [DONE]\n\n"
"""The last event of every OpenAI stream."""


def encode_event(payload: Mapping[str, Any]) -> bytes:
    """``data: {json}\\n\\n`` for one event (compact JSON, UTF-8, never pretty-printed)."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return b"data: " + body.encode("utf-8") + b"\n\n"


class EventStreamResponse(StreamingResponse):
    """A ``text/event-stream`` response that notices a client disconnect at once.

    Starlette's ``StreamingResponse`` only learns of a disconnect when a write fails (ASGI spec
    2.4), so a request still waiting for its first token would keep its KV blocks. This one
    always listens for ``http.disconnect`` beside the stream and cancels the body iterator when
    it comes. ``on_close`` runs exactly once when the response ends for any reason (finished,
    disconnected, failed): the server aborts the engine request there, which frees its blocks.
    """

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterable[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(
            content,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    with contextlib.suppress(OSError):  # the client went away mid-write
                        await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            self._on_close()
