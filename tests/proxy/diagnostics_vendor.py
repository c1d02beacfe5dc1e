"""A mock vendor that diagnoses its own prompt-cache misses as Anthropic and OpenAI document it.

Served on 127.0.0.1 by the vendor-diagnostics tests. ``POST /v1/messages`` follows Anthropic's
cache diagnostics (https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics,
checked 2026-12-03): it keeps a fingerprint (model, system, tools, messages) of each request that
carries a ``diagnostics`` object, keyed by the response id it answers with (``msg_mock_N``);
a request naming one in ``diagnostics.previous_message_id`` gets the first divergence in
``diagnostics.cache_miss_reason`` (``model_changed``, ``system_changed``, ``tools_changed``,
``messages_changed`` when an earlier message differs rather than messages being appended,
each with ``cache_missed_input_tokens``; ``previous_message_not_found`` for an unknown id) or
``diagnostics: null`` when nothing diverged. ``POST /v1/responses`` does the same for OpenAI's
``prompt_cache_options.comparison_response_id`` (``resp_mock_N``; ``prompt_cache_diagnostics``
of type ``cache_miss`` with ``reason`` ``model_changed``, ``tools_changed``,
``text_format_changed`` or ``input_changed`` and ``cache_missed_tokens``, else ``cache_hit``,
or ``comparison_response_not_found``), shapes as in the ``openai`` SDK's ``Response`` type.

``stream: true`` answers SSE: Anthropic's diagnosis rides on ``message_start.message``,
OpenAI's on ``response.completed``'s ``response`` (``response.created`` carries null).
``x-mock-diagnosis: unavailable|pending`` forces Anthropic's ``unavailable`` type or a null
``cache_miss_reason``. Every request body (exact bytes) and every diagnosis sent is kept.

Usage: 20 uncached input tokens, 1,500 written to the cache, and 3,000 read when an earlier
request had the same model, system and tools and its messages begin this one's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from proxy_support import RunningProxy, mock_config
from servers import ServerThread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from promptcache.proxy.app import build_app

#: Tokens the mock estimates per character of a diverged part (cache_missed_*tokens).
CHARS_PER_TOKEN = 4


@dataclass
class DiagnosticsVendor:
    """State of the mock: ``bodies`` (exact request bytes), ``sent`` (response id -> the
    diagnosis object it carried, None for null/absent)."""

    bodies: list[bytes] = field(default_factory=list)
    sent: dict[str, Any] = field(default_factory=dict)
    _fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)
    _seen: list[dict[str, Any]] = field(default_factory=list)
    _count: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
            ]
        )

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._count += 1
            return f"{prefix}_mock_{self._count}"

    def _cache_read(self, fp: dict[str, Any]) -> int:
        for old in self._seen:
            same = all(old[k] == fp[k] for k in fp if k != "messages")
            if same and fp["messages"][: len(old["messages"])] == old["messages"]:
                return 3000
        return 0

    # -- Anthropic ----------------------------------------------------------------------------
    async def _messages(self, request: Request) -> Response:
        raw = await request.body()
        self.bodies.append(raw)
        body = json.loads(raw)
        fp = {k: body.get(k) for k in ("model", "system", "tools", "messages")}
        message_id = self._next_id("msg")
        read = self._cache_read(fp)
        self._seen.append(fp)
        diagnostics: Any = None
        asked = isinstance(body.get("diagnostics"), dict)
        if asked:
            forced = request.headers.get("x-mock-diagnosis")
            previous_id = body["diagnostics"].get("previous_message_id")
            if forced == "unavailable":
                diagnostics = {"cache_miss_reason": {"type": "unavailable"}}
            elif forced == "pending":
                diagnostics = {"cache_miss_reason": None}
            elif previous_id is not None:
                previous = self._fingerprints.get(previous_id)
                if previous is None:
                    diagnostics = {"cache_miss_reason": {"type": "previous_message_not_found"}}
                else:
                    reason = _anthropic_divergence(previous, fp)
                    if reason is not None:
                        diagnostics = {"cache_miss_reason": reason}
            self._fingerprints[message_id] = fp
        self.sent[message_id] = diagnostics
        usage = {
            "input_tokens": 20,
            "cache_creation_input_tokens": 1500,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": 1500, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 2,
        }
        message: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        if asked:
            message["diagnostics"] = diagnostics
        if body.get("stream") is True:
            start = {**message, "content": [], "stop_reason": None}
            events = [
                ("message_start", {"type": "message_start", "message": start}),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "ok"},
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "usage": {"output_tokens": 2},
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
            text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
            return Response(text, media_type="text/event-stream")
        return JSONResponse(message)

    # -- OpenAI Responses ---------------------------------------------------------------------
    async def _responses(self, request: Request) -> Response:
        raw = await request.body()
        self.bodies.append(raw)
        body = json.loads(raw)
        given = body.get("input")
        prompt = [{"role": "user", "content": given}] if isinstance(given, str) else given
        fp = {
            "model": body.get("model"),
            "tools": body.get("tools"),
            "text_format": (body.get("text") or {}).get("format"),
            "messages": [body.get("instructions"), *(prompt or [])],
        }
        response_id = self._next_id("resp")
        read = self._cache_read(fp)
        self._seen.append(fp)
        self._fingerprints[response_id] = fp
        diagnostics: Any = None
        options = body.get("prompt_cache_options")
        compared = options.get("comparison_response_id") if isinstance(options, dict) else None
        if compared is not None:
            previous = self._fingerprints.get(compared)
            if previous is None:
                diagnostics = {"type": "comparison_response_not_found"}
            else:
                diagnostics = _openai_divergence(previous, fp)
        self.sent[response_id] = diagnostics
        response: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": 1764489600,
            "status": "completed",
            "model": body.get("model"),
            "output": [
                {
                    "type": "message",
                    "id": "msg_out",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "prompt_cache_diagnostics": diagnostics,
            "usage": {
                "input_tokens": 1520 + read,
                "input_tokens_details": {"cached_tokens": read},
                "output_tokens": 2,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 1522 + read,
            },
        }
        if body.get("stream") is True:
            created = {
                **response,
                "status": "in_progress",
                "output": [],
                "usage": None,
                "prompt_cache_diagnostics": None,
            }
            item = {**response["output"][0], "status": "in_progress", "content": []}
            part = {"type": "output_text", "text": "", "annotations": []}
            events = [
                {"type": "response.created", "sequence_number": 0, "response": created},
                {
                    "type": "response.output_item.added",
                    "sequence_number": 1,
                    "output_index": 0,
                    "item": item,
                },
                {
                    "type": "response.content_part.added",
                    "sequence_number": 2,
                    "item_id": "msg_out",
                    "output_index": 0,
                    "content_index": 0,
                    "part": part,
                },
                {
                    "type": "response.output_text.delta",
                    "sequence_number": 3,
                    "item_id": "msg_out",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "ok",
                    "logprobs": [],
                },
                {"type": "response.completed", "sequence_number": 4, "response": response},
            ]
            text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
            return Response(text, media_type="text/event-stream")
        return JSONResponse(response)


def _chars(value: Any) -> int:
    return len(json.dumps(value))


def _anthropic_divergence(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """The first divergence of ``new`` from ``old`` (Anthropic's order), or None."""
    missed = _chars(new["system"]) + _chars(new["tools"]) + _chars(new["messages"])
    for key in ("model", "system", "tools"):
        if old[key] != new[key]:
            return {
                "type": f"{key}_changed",
                "cache_missed_input_tokens": missed // CHARS_PER_TOKEN,
            }
    kept = old["messages"] or []
    if (new["messages"] or [])[: len(kept)] != kept:
        return {"type": "messages_changed", "cache_missed_input_tokens": missed // CHARS_PER_TOKEN}
    return None


def _openai_divergence(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's ``prompt_cache_diagnostics`` for ``new`` compared with ``old``."""
    missed = (_chars(new["tools"]) + _chars(new["messages"])) // CHARS_PER_TOKEN
    for key, reason in (
        ("model", "model_changed"),
        ("tools", "tools_changed"),
        ("text_format", "text_format_changed"),
    ):
        if old[key] != new[key]:
            return {
                "type": "cache_miss",
                "reason": reason,
                "cache_missed_tokens": missed,
                "comparison_reusable_tokens": 0,
            }
    kept = old["messages"]
    if new["messages"][: len(kept)] != kept:
        return {
            "type": "cache_miss",
            "reason": "input_changed",
            "cache_missed_tokens": missed,
            "comparison_reusable_tokens": 0,
        }
    return {"type": "cache_hit"}


@dataclass
class VendorServer:
    """The mock vendor running on 127.0.0.1: its state and its base URL."""

    vendor: DiagnosticsVendor
    url: str


@pytest.fixture(name="diagnostics_vendor")
def diagnostics_vendor_fixture() -> Iterator[VendorServer]:
    """A fresh :class:`DiagnosticsVendor` under uvicorn on 127.0.0.1 for one test."""
    vendor = DiagnosticsVendor()
    with ServerThread(vendor.app(), graceful_shutdown_s=1.0) as server:
        yield VendorServer(vendor, server.url)


@pytest.fixture(name="start_diagnosing_proxy")
def start_diagnosing_proxy_fixture(
    tmp_path: Path, diagnostics_vendor: VendorServer
) -> Iterator[Callable[..., RunningProxy]]:
    """``start(**ProxyConfig overrides) -> RunningProxy``: a proxy in front of the mock vendor
    (every upstream is the mock), logging to ``tmp_path/log.db`` unless ``db_path`` is given."""
    running: list[ServerThread] = []

    def start(**overrides: Any) -> RunningProxy:
        db_path = overrides.pop("db_path", tmp_path / "log.db")
        app = build_app(mock_config(diagnostics_vendor.url, db_path, **overrides))
        server = ServerThread(app).__enter__()
        running.append(server)
        return RunningProxy(server.url, db_path, app, server)

    yield start
    for server in running:
        server.stop()
