"""A mock Anthropic Messages upstream that caches by the lookback rule (tests only).

It implements the documented rule on its own, without promptcache code
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching , checked 2026-12-01):

- the prompt is a list of blocks: each tool, each system block, each message content block (a
  string content is one block); a block's identity is its JSON without ``cache_control``;
- positions: one per block, except that consecutive ``tool_use``/``tool_result`` blocks share one;
- a *write* happens at each breakpoint (``cache_control`` on a block; a top-level
  ``cache_control`` marks the last block) and stores the prefix through that block;
- a breakpoint at position ``b`` *reads* the longest stored prefix ending at a block whose
  position ``p`` has ``b - p <= 20``; the request's read is the longest over its breakpoints;
- usage: ``cache_read_input_tokens`` = that prefix, ``cache_creation_input_tokens`` = from there
  to the last breakpoint (reported as 5m), ``input_tokens`` = the rest;
- a block's tokens = the number of whitespace-separated words of its JSON text;
- caches are isolated per API key (``x-api-key``, else ``authorization``), as Anthropic
  isolates them per workspace.

It answers in the exact wire format: a JSON message, or with ``"stream": true`` the SSE events
``message_start`` (usage with the cache fields), ``content_block_*``, ``message_delta``
(cumulative ``output_tokens``) and ``message_stop``. ``log`` keeps ``(read, write, input)`` per
request.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from starlette.types import Receive, Scope, Send
from upstreams import request_body

LOOKBACK = 20
OUTPUT_TOKENS = 7
REPLY = "Working on it."


def block_tokens(block: Any) -> int:
    """Tokens of one block in this mock: words of its JSON text."""
    return len(json.dumps(block, sort_keys=True).split())


def _strip(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def prompt_blocks(body: dict[str, Any]) -> list[tuple[Any, bool, bool]]:
    """``(block without cache_control, is a tool block, has a breakpoint)`` in prefix order."""
    out: list[tuple[Any, bool, bool]] = []
    for tool in body.get("tools") or []:
        out.append((_strip(tool), False, "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str):
        out.append(({"type": "text", "text": system}, False, False))
    for block in system if isinstance(system, list) else []:
        out.append((_strip(block), False, "cache_control" in block))
    for message in body.get("messages") or []:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content:
            is_tool = block.get("type") in ("tool_use", "tool_result")
            out.append(
                ({"role": message["role"], **_strip(block)}, is_tool, "cache_control" in block)
            )
    if "cache_control" in body and out:
        block, is_tool, _ = out[-1]
        out[-1] = (block, is_tool, True)
    return out


class LookbackCache:
    """The cache: prefix hash -> tokens; ``usage(body)`` applies the rule and stores writes."""

    def __init__(self) -> None:
        self.entries: dict[str, int] = {}
        self.log: list[tuple[int, int, int]] = []
        self._lock = threading.Lock()

    def usage(self, body: dict[str, Any], api_key: str) -> dict[str, Any]:
        blocks = prompt_blocks(body)
        keys, totals, positions = [], [], []
        digest = hashlib.sha256(f"{api_key}\n{body.get('model')}".encode())
        running, pos, prev_tool = 0, -1, False
        for block, is_tool, _ in blocks:
            digest.update(json.dumps(block, sort_keys=True).encode())
            keys.append(digest.copy().hexdigest())
            running += block_tokens(block)
            totals.append(running)
            if not (is_tool and prev_tool):
                pos += 1
            prev_tool = is_tool
            positions.append(pos)
        marks = [i for i, (_, _, marked) in enumerate(blocks) if marked]
        with self._lock:
            read = 0
            for b in marks:
                for i in range(b, -1, -1):
                    if positions[b] - positions[i] > LOOKBACK:
                        break
                    if keys[i] in self.entries:
                        read = max(read, self.entries[keys[i]])
                        break
            last = totals[marks[-1]] if marks else 0
            write = max(0, last - read)
            for b in marks:
                self.entries[keys[b]] = totals[b]
            total = totals[-1] if totals else 0
            uncached = total - read - write
            self.log.append((read, write, uncached))
        return {
            "input_tokens": uncached,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": 0},
            "output_tokens": OUTPUT_TOKENS,
        }


class LookbackUpstream:
    """ASGI app serving ``POST /v1/messages`` from a :class:`LookbackCache`."""

    def __init__(self) -> None:
        self.cache = LookbackCache()
        self._count = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = await request_body(scope, receive, send)
        if raw is None:
            return
        if scope["path"] != "/v1/messages":
            await _respond(send, 404, "application/json", [b'{"type":"error"}'])
            return
        body = json.loads(raw)
        headers = dict(scope["headers"])
        key = headers.get(b"x-api-key") or headers.get(b"authorization") or b""
        usage = self.cache.usage(body, key.decode())
        self._count += 1
        msg_id = f"msg_lookback{self._count:04d}"
        if body.get("stream"):
            await _respond(send, 200, "text/event-stream", _events(msg_id, body["model"], usage))
            return
        payload = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": REPLY}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        await _respond(send, 200, "application/json", [json.dumps(payload).encode()])


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _events(msg_id: str, model: str, usage: dict[str, Any]) -> list[bytes]:
    start_usage = {**usage, "output_tokens": 1}
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    return [
        _event("message_start", {"type": "message_start", "message": message}),
        _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _event("ping", {"type": "ping"}),
        _event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": REPLY},
            },
        ),
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        ),
        _event("message_stop", {"type": "message_stop"}),
    ]


async def _respond(send: Send, status: int, content_type: str, pieces: list[bytes]) -> None:
    headers = [(b"content-type", content_type.encode())]
    if content_type == "application/json":
        headers.append((b"content-length", str(sum(map(len, pieces))).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    for piece in pieces:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
