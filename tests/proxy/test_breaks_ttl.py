"""``ttl_expired`` only where a TTL applies and the cache was not read, through a live proxy:

- a self-hosted server reached by URL (``promptcache proxy --upstream http://...``, vendor
  ``openai_compatible``, as vLLM, SGLang or replicas of our engine are): a real engine server,
  whose prefix cache evicts by LRU, reads the prompt back ten minutes later; the explainer
  called that a 5-minute TTL expiry, and the report then advised a 1-hour TTL;
- an OpenAI upstream (the mock, replaying a recorded usage with cached tokens) whose cache
  is still read after more than 5 minutes: a hit, not a break.

A fake clock moves the proxy's time; the engine's cache does not care.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import openai
from proxy_support import FakeClock, mock_config
from servers import ServerThread
from upstreams import MockUpstream

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.proxy.app import build_app
from promptcache.proxy.config import ProxyConfig, UpstreamConfig
from promptcache.proxy.report import build_report

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
T0 = 1_764_493_200.0
STORY = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside in the "
    "park with her friends. One day, she found a big red ball under a tree. "
)


def _rows(db: Path, count: int) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + 10
    while len(rows) < count and time.monotonic() < deadline:
        time.sleep(0.05)
        with closing(sqlite3.connect(db)) as conn:
            rows = conn.execute(
                "SELECT vendor, cache_read_tokens, break_reason FROM requests ORDER BY started_at"
            ).fetchall()
    return rows


def test_a_self_hosted_upstream_read_back_after_ten_minutes_is_no_ttl_expiry(
    tmp_path: Path,
) -> None:
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
    db = tmp_path / "log.db"
    clock = FakeClock(T0)
    with ServerThread(create_app(engine, served_model_names=["tiny"])) as upstream:
        local = UpstreamConfig(name="custom", url=upstream.url, vendor="openai_compatible")
        config = ProxyConfig(
            upstreams={"custom": local},
            default_upstream="custom",
            db_path=db,
            flush_interval_s=0.01,
            clock=clock,
        )
        with ServerThread(build_app(config)) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0)
            for question in ("Who?", "Where?"):
                client.completions.create(model="tiny", prompt=STORY + question, max_tokens=2)
                clock.now += 600  # ten minutes between the two
            rows = _rows(db, 2)
    assert [(vendor, reason) for vendor, _, reason in rows] == [
        ("openai_compatible", "new_prefix"),
        ("openai_compatible", None),
    ]
    assert rows[1][1] and rows[1][1] >= 16  # the engine read the story's blocks back
    report = build_report(db, since=T0 - 60, until=T0 + 3600, now=T0 + 3600)
    assert report.total.breaks == 0
    advice = " ".join(r.message for r in report.recommendations)
    assert "TTL ran out" not in advice and "1-hour TTL" not in advice, advice


def test_a_vendor_cache_still_read_after_its_ttl_is_a_hit_not_a_break(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    clock = FakeClock(T0)
    with ServerThread(MockUpstream()) as upstream:
        config = mock_config(upstream.url, db, flush_interval_s=0.01, clock=clock)
        with ServerThread(build_app(config)) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-x", max_retries=0)
            messages: Any = [
                {"role": "system", "content": STORY * 20},
                {"role": "user", "content": "Who?"},
            ]
            for _ in range(2):
                client.chat.completions.create(model="gpt-4o", messages=messages)
                clock.now += 400  # past the 5-minute default
            rows = _rows(db, 2)
    # the recorded usage reads 1,920 cached tokens each time: the cache was there
    assert rows == [("openai", 1920, "new_prefix"), ("openai", 1920, None)]
