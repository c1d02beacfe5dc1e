"""Break explanation across OpenAI's two text APIs, through a live proxy in front of a real
engine server, with the official ``openai`` client: a legacy completions prompt that holds a
chat request's system text is a new prefix, not an edit of that chat request's system prompt."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import openai
from proxy_support import mock_config
from servers import ServerThread

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.proxy.app import build_app

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
STORY = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside in the "
    "park with her friends. One day, she found a big red ball under a tree. "
)


def test_a_completions_prompt_after_a_chat_with_its_text_is_a_new_prefix(tmp_path: Path) -> None:
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
    app = create_app(engine, served_model_names=["tiny"], chat_template=TEMPLATE)
    db = tmp_path / "log.db"
    with (
        ServerThread(app) as upstream,
        ServerThread(build_app(mock_config(upstream.url, db, flush_interval_s=0.01))) as proxy,
    ):
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0)
        for question in ("Who?", "Where?"):  # the second reads the first one's cache
            client.chat.completions.create(
                model="tiny",
                messages=[
                    {"role": "system", "content": STORY},
                    {"role": "user", "content": question},
                ],
                max_tokens=2,
            )
        completion = client.completions.create(model="tiny", prompt=STORY, max_tokens=2)
        assert completion.usage is not None
        rows: list[tuple[str, str | None, str | None]] = []
        deadline = time.monotonic() + 10
        while len(rows) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            with closing(sqlite3.connect(db)) as conn:
                rows = conn.execute(
                    "SELECT api, break_reason, break_segment FROM requests ORDER BY started_at"
                ).fetchall()
    assert rows == [
        ("openai_chat", "new_prefix", None),
        ("openai_chat", None, None),
        ("openai_completions", "new_prefix", None),
    ]


def test_a_chat_request_in_between_does_not_hide_the_completions_prompt_edited(
    tmp_path: Path,
) -> None:
    """An app sending both APIs: a completions prompt whose end changed is an edit of the last
    completions prompt, whatever chat request came in between, so it joins that prompt's
    family (the engine reads its cached blocks) instead of opening a new prefix."""
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
    app = create_app(engine, served_model_names=["tiny"], chat_template=TEMPLATE)
    db = tmp_path / "log.db"
    with (
        ServerThread(app) as upstream,
        ServerThread(build_app(mock_config(upstream.url, db, flush_interval_s=0.01))) as proxy,
    ):
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0)
        client.completions.create(model="tiny", prompt=STORY + "Part one.", max_tokens=2)
        client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Who are you?"}], max_tokens=2
        )
        second = client.completions.create(model="tiny", prompt=STORY + "Part two.", max_tokens=2)
        assert second.usage is not None and second.usage.prompt_tokens_details is not None
        assert second.usage.prompt_tokens_details.cached_tokens > 0
        rows: list[tuple[str, str | None, int, str]] = []
        deadline = time.monotonic() + 10
        while len(rows) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            with closing(sqlite3.connect(db)) as conn:
                rows = conn.execute(
                    "SELECT api, break_reason, previous_request_id IS NOT NULL, prefix_family"
                    " FROM requests ORDER BY started_at"
                ).fetchall()
    assert [row[:3] for row in rows] == [
        ("openai_completions", "new_prefix", 0),
        ("openai_chat", "new_prefix", 0),
        ("openai_completions", None, 1),
    ]
    assert rows[2][3] == rows[0][3] != rows[1][3]
