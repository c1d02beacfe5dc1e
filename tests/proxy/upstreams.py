"""A mock vendor upstream speaking the Anthropic, OpenAI and Gemini wire formats (tests only).

It replays the recorded bodies in ``tests/data/vendors/<api>/<case>.json`` (non-streaming) and
``<case>.sse`` (streaming, byte for byte), so the cache usage fields are exactly as documented.
Requests choose what they get with headers, which the official clients can send as
``extra_headers`` and which the proxy forwards like any other header:

- ``x-mock-case``: the recorded case (file stem); defaults per API below.
- ``x-mock-chunk``: stream the bytes in pieces of this many bytes (default: one event a chunk).
- ``x-mock-delay-ms``: sleep between chunks.
- ``x-mock-repeat``: send the stream's second event (the first delta) this many extra times.
- ``x-mock-fault``: ``status-<code>`` (a vendor-shaped error with that status), ``slow`` (answer
  after 3 s), ``hang`` (send the first event, then comments every 20 ms until the client goes
  away), ``cut`` (send half of the stream, then drop the connection), ``error`` (send half of
  the stream, then the vendor's own mid-stream error event, and end the stream cleanly: Anthropic
  ``event: error``, OpenAI chat/completions and Gemini ``data: {"error": ...}``, Responses
  ``response.failed``), ``linger`` (send the whole stream, then keep the response open until
  the client goes away, as a server slow to close does), ``no-stream-options`` (400 for a body
  with ``stream_options``, as some OpenAI-compatible servers do).

Like OpenAI, a chat or completions stream carries the usage chunk (and ``"usage": null`` on
every chunk) only when the request asked for ``stream_options.include_usage``. Every request is
kept in ``requests`` (method, path, query, headers, exact body bytes) for assertions.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servers import read_body
from starlette.types import Message, Receive, Scope, Send

DATA = Path(__file__).resolve().parents[1] / "data" / "vendors"

DEFAULT_CASES = {
    "anthropic": "cache_read_and_write_5m",
    "openai_chat": "cached",
    "openai_responses": "cached",
    "openai_completions": "cached",
    "gemini": "implicit_cache_thinking",
}

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n")
_USAGE_NULL = re.compile(rb',"usage":null')


@dataclass(frozen=True)
class ReceivedRequest:
    """What the upstream saw."""

    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (lower-case), or None."""
        return next((v for k, v in self.headers if k == name), None)

    def header_names(self) -> set[str]:
        """Lower-case names of all headers received."""
        return {k for k, _ in self.headers}


def split_events(raw: bytes) -> list[bytes]:
    """A recorded ``.sse`` file cut into its events, each with its blank line."""
    events, start = [], 0
    for match in _EVENT_END.finditer(raw):
        events.append(raw[start : match.end()])
        start = match.end()
    if start < len(raw):
        events.append(raw[start:])
    return events


def recorded(api: str, case: str, suffix: str) -> bytes:
    """The bytes of a recorded vendor body."""
    return (DATA / api / f"{case}.{suffix}").read_bytes()


def without_usage(stream: bytes) -> bytes:
    """An OpenAI chat stream as sent when the request did not ask for usage."""
    kept = []
    for event in split_events(stream):
        data = event.strip()[len(b"data: ") :]
        if data.startswith(b"{"):
            chunk = json.loads(data)
            if chunk.get("choices") == [] and chunk.get("usage"):
                continue
        kept.append(_USAGE_NULL.sub(b"", event))
    return b"".join(kept)


async def request_body(scope: Scope, receive: Receive, send: Send) -> bytes | None:
    """The whole HTTP request body; None after answering a lifespan scope (startup and
    shutdown complete). Shared by the mock upstreams' ASGI entry points."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return None
    return await read_body(receive)


class MockUpstream:
    """The ASGI app; serve it with ``servers.ServerThread``."""

    def __init__(self) -> None:
        self.requests: list[ReceivedRequest] = []
        self.disconnects = 0
        self.disconnected = threading.Event()
        #: requests being answered now, and the most at any one time since ``reset``
        self.in_flight = 0
        self.peak_in_flight = 0
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget recorded requests, disconnects and the in-flight peak."""
        with self._lock:
            self.requests.clear()
            self.disconnects = 0
            self.disconnected.clear()
            self.peak_in_flight = self.in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await request_body(scope, receive, send)
        if body is None:
            return
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        request = ReceivedRequest(
            scope["method"], scope["path"], scope["query_string"].decode(), headers, body
        )
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        answered = False

        async def send_counted(message: Message) -> None:
            # the request stops being in flight before its last bytes leave: a client that has
            # them may reuse the connection at once, and the next request must not be counted
            # beside this one while this handler has yet to return
            nonlocal answered
            if (
                message["type"] == "http.response.body"
                and not message.get("more_body", False)
                and not answered
            ):
                answered = True
                with self._lock:
                    self.in_flight -= 1
            await send(message)

        try:
            await self._route(request, receive, send_counted)
        except asyncio.CancelledError:
            self._note_disconnect()
            raise
        finally:
            if not answered:
                with self._lock:
                    self.in_flight -= 1

    def _note_disconnect(self) -> None:
        with self._lock:
            self.disconnects += 1
        self.disconnected.set()

    async def _route(self, request: ReceivedRequest, receive: Receive, send: Send) -> None:
        path = request.path
        if path == "/v1/models" and request.method == "GET":
            models = {"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]}
            await _json(send, 200, models)
            return
        if path.startswith("/v1/models/") and request.method == "GET":
            await _retrieve_model(send, path.removeprefix("/v1/models/"))
            return
        if path == "/v1/messages/count_tokens":
            await _json(send, 200, {"input_tokens": 2095})
            return
        api = {
            "/v1/messages": "anthropic",
            "/v1/chat/completions": "openai_chat",
            "/v1/responses": "openai_responses",
            "/v1/completions": "openai_completions",
        }.get(path)
        gemini_stream = False
        if path.startswith("/v1beta/models/"):
            action = path.rsplit(":", 1)[-1]
            if action == "countTokens":
                await _json(send, 200, {"totalTokens": 31})
                return
            api, gemini_stream = "gemini", action == "streamGenerateContent"
        if api is None:
            await _json(send, 404, {"error": "mock upstream has no route " + path})
            return
        body: dict[str, Any] = json.loads(request.body)
        fault = request.header("x-mock-fault") or ""
        if fault.startswith("status-"):
            status = int(fault.removeprefix("status-"))
            await _json(send, status, _vendor_error(api, status))
            return
        if fault == "slow":
            await asyncio.sleep(3)
        if fault == "no-stream-options" and "stream_options" in body:
            await _json(send, 400, {"detail": "Extra inputs are not permitted: stream_options"})
            return
        case = request.header("x-mock-case") or DEFAULT_CASES[api]
        if api == "gemini" and gemini_stream and "alt=sse" not in request.query:
            chunks = [
                json.loads(e.strip()[len(b"data: ") :])
                for e in split_events(recorded(api, case, "sse"))
            ]
            await _json(send, 200, chunks)
            return
        if not (gemini_stream or body.get("stream") is True):
            await _send(send, 200, "application/json", [recorded(api, case, "json")])
            return
        stream = recorded(api, case, "sse")
        if api in ("openai_chat", "openai_completions") and not (
            body.get("stream_options") or {}
        ).get("include_usage"):
            stream = without_usage(stream)
        repeat = int(request.header("x-mock-repeat") or 0)
        if repeat:
            events = split_events(stream)
            stream = b"".join([events[0], *[events[1]] * repeat, *events[1:]])
        size = int(request.header("x-mock-chunk") or 0)
        if size:
            pieces = [stream[i : i + size] for i in range(0, len(stream), size)]
        else:
            pieces = split_events(stream)
        delay = int(request.header("x-mock-delay-ms") or 0) / 1000
        if fault == "hang":
            await self._hang(send, pieces[0], receive)
            return
        if fault == "cut":
            await _send(send, 200, "text/event-stream", pieces[: len(pieces) // 2], finish=False)
            return
        if fault == "error":
            events = split_events(stream)
            half = events[: len(events) // 2]
            await _send(send, 200, "text/event-stream", [*half, _stream_error(api, events[0])])
            return
        if fault == "linger":
            await _send(send, 200, "text/event-stream", pieces, finish=False)
            while (await receive())["type"] != "http.disconnect":
                pass
            self._note_disconnect()
            return
        await _send(send, 200, "text/event-stream; charset=utf-8", pieces, delay=delay)

    async def _hang(self, send: Send, first: bytes, receive: Receive) -> None:
        """Send one event, then keep-alive comments until the client disconnects."""
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        await send({"type": "http.response.body", "body": first, "more_body": True})

        async def comments() -> None:
            while True:
                await asyncio.sleep(0.02)
                await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})

        task = asyncio.ensure_future(comments())
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        finally:
            task.cancel()
        self._note_disconnect()


def _stream_error(api: str, first_event: bytes) -> bytes:
    """The error event ``api`` sends when it fails after the stream started (wire format)."""
    if api == "anthropic":
        data = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
    if api == "openai_responses":
        # response.failed repeats the response object, now failed, with its error
        created = json.loads(first_event.split(b"data: ", 1)[1])
        response = dict(created["response"], status="failed")
        response["error"] = {"code": "server_error", "message": "The model had an error"}
        data = {"type": "response.failed", "sequence_number": 99, "response": response}
        return b"event: response.failed\ndata: " + json.dumps(data).encode() + b"\n\n"
    if api == "gemini":
        data = _vendor_error(api, 503)
        return b"data: " + json.dumps(data).encode() + b"\r\n\r\n"
    return b"data: " + json.dumps(_vendor_error(api, 500)).encode() + b"\n\n"


def _vendor_error(api: str, status: int) -> dict[str, Any]:
    if api == "anthropic":
        return {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    if api == "gemini":
        return {
            "error": {
                "code": status,
                "message": "The model is overloaded.",
                "status": "UNAVAILABLE",
            }
        }
    return {
        "error": {
            "message": "The server had an error",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


#: ``GET /v1/models/{model}`` as OpenAI answers it: the model object ``{id, created, object,
#: owned_by}`` (https://developers.openai.com/api/reference/cli/resources/models/methods/retrieve,
#: checked 2026-12-05), or OpenAI's 404 ``model_not_found`` error for a model it does not serve.
MODEL_CARDS = {
    "gpt-4o": {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"}
}


async def _retrieve_model(send: Send, model: str) -> None:
    card = MODEL_CARDS.get(model)
    if card is not None:
        await _json(send, 200, card)
        return
    error = {
        "message": f"The model `{model}` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
    await _json(send, 404, {"error": error})


async def _json(send: Send, status: int, payload: Any) -> None:
    await _send(send, status, "application/json", [json.dumps(payload).encode()])


async def _send(
    send: Send,
    status: int,
    content_type: str,
    pieces: list[bytes],
    *,
    delay: float = 0.0,
    finish: bool = True,
) -> None:
    headers = [(b"content-type", content_type.encode()), (b"x-upstream", b"mock")]
    if content_type == "application/json":
        headers.append((b"content-length", str(sum(map(len, pieces))).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    for piece in pieces:
        if delay:
            await asyncio.sleep(delay)
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    if finish:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
