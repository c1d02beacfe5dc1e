"""A client's body whose ``role`` or content block ``type`` is not a string (a list, an object),
through a live proxy with the official clients: the upstream answers the mistake, and the proxy
still fingerprints the prompt and explains the break, with no traceback in its log.

The chat request goes to a real engine server (which answers 400); the Anthropic one to the
lookback mock upstream (tests/proxy/lookback_upstream.py), whose second turn appends more than
20 blocks, so the explainer counts the request's block positions."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from lookback_upstream import LookbackUpstream
from proxy_support import mock_config
from servers import ServerThread

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.proxy.app import build_app

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
TEMPLATE = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"


def _rows(db: Path, count: int, columns: str) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + 10
    while len(rows) < count and time.monotonic() < deadline:
        time.sleep(0.05)
        with closing(sqlite3.connect(db)) as conn:
            rows = conn.execute(f"SELECT {columns} FROM requests ORDER BY started_at").fetchall()
    return rows


def test_a_chat_role_that_is_not_a_string_is_still_fingerprinted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
    app = create_app(engine, served_model_names=["tiny"], chat_template=TEMPLATE)
    db = tmp_path / "log.db"
    with (
        ServerThread(app) as upstream,
        ServerThread(build_app(mock_config(upstream.url, db, flush_interval_s=0.01))) as proxy,
        caplog.at_level("INFO"),
    ):
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0)
        for role in (["system"], {"name": "system"}):
            messages: Any = [
                {"role": role, "content": "You tell short stories."},
                {"role": "user", "content": "Once upon a time"},
            ]
            with pytest.raises(openai.BadRequestError) as info:
                client.chat.completions.create(model="tiny", messages=messages, max_tokens=2)
            assert "messages[0].role must be" in str(info.value)  # the engine's answer
        rows = _rows(db, 2, "status, prefix_hash, segment_hashes")
    assert [status for status, _, _ in rows] == [400, 400]
    assert all(prefix and segments for _, prefix, segments in rows), rows
    assert not any(r.exc_info for r in caplog.records), caplog.text
    assert "could not read the prefix" not in caplog.text


def test_a_content_block_type_that_is_not_a_string_does_not_break_the_explainer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    system: Any = [{"type": "text", "text": "You are the build agent of Acme Anvils. " * 40}]
    first: Any = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    for bad in (["text"], {"kind": "text"}):
        db = tmp_path / f"{type(bad).__name__}.db"
        blocks = [{"type": bad, "text": f"attached {i}"} for i in range(22)]
        second: Any = [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": "Working on it."},
            {
                "role": "user",
                "content": [
                    *blocks,
                    {"type": "text", "text": "and now?", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ]
        with (
            ServerThread(LookbackUpstream()) as upstream,
            ServerThread(build_app(mock_config(upstream.url, db, flush_interval_s=0.01))) as proxy,
            caplog.at_level("INFO"),
        ):
            key = f"sk-ant-api03-malformed-{type(bad).__name__}-0123456789abcdef"
            client = anthropic.Anthropic(base_url=proxy.url, api_key=key, max_retries=0)
            for messages in (first, second):
                client.messages.create(
                    model="claude-sonnet-4-5", max_tokens=5, system=system, messages=messages
                )
            rows = _rows(db, 2, "break_reason, break_segment")
        # the second turn's breakpoint is 23 positions past the first one's write
        assert rows == [("new_prefix", None), ("lookback_exceeded", "messages[2].content[22]")]
        assert not any(r.exc_info for r in caplog.records), caplog.text
        assert "cache-break explainer failed" not in caplog.text
