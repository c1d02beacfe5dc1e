"""A prompt under the minimum cacheable prefix loses no tokens to its ``below_minimum`` break:
nothing of it is ever served from cache. Through a live proxy in front of a real engine server
(tinystories, the official ``openai`` client), and for a log migrated from schema step 17."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from decimal import Decimal
from pathlib import Path

import openai
from proxy_support import mock_config
from servers import ServerThread

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.proxy.app import build_app
from promptcache.proxy.config import UpstreamConfig
from promptcache.proxy.report import build_report
from promptcache.proxy.store import open_log

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
SHORT = "Once upon a time, Lily"  # far under one 16-token KV block (+ the recomputed last token)
BREAKS = "SELECT breaks, tokens_lost FROM report_breaks_hourly WHERE reason = 'below_minimum'"


STORY = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside in the "
    "park with her friends. One day, she found a big red ball under a tree. "
) * 3


def _log_short_prompts(db: Path, repeats: int = 0) -> list[tuple[int, int, str | None, int]]:
    """Logs SHORT three times, then a long prompt ``repeats`` times; returns the short ones'
    rows (input, cache read, break reason, whether a predecessor was found)."""
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
    upstream_app = create_app(engine, served_model_names=["tiny"])
    with ServerThread(upstream_app) as upstream:
        engine_upstream = {
            "openai": UpstreamConfig(
                name="openai", url=upstream.url, vendor="engine", price_as="gpt-5"
            )
        }
        config = mock_config(upstream.url, db, flush_interval_s=0.01, upstreams=engine_upstream)
        with ServerThread(build_app(config)) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0)
            for _ in range(3):  # the same prompt each time: the engine reads none of it
                done = client.completions.create(
                    model="tiny", prompt=SHORT, max_tokens=2, temperature=0
                )
                assert done.usage is not None and done.usage.prompt_tokens_details is not None
                assert done.usage.prompt_tokens_details.cached_tokens == 0
            for _ in range(repeats):
                client.completions.create(model="tiny", prompt=STORY, max_tokens=2)
            rows: list[tuple[int, int, str | None, int]] = []
            deadline = time.monotonic() + 10
            while len(rows) < 3 + repeats and time.monotonic() < deadline:
                time.sleep(0.05)
                with closing(sqlite3.connect(db)) as conn:
                    rows = conn.execute(
                        "SELECT total_input_tokens, cache_read_tokens, break_reason,"
                        " previous_request_id IS NOT NULL FROM requests ORDER BY started_at"
                    ).fetchall()
    return rows[:3]


def test_a_prompt_under_one_kv_block_loses_no_tokens(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    rows = _log_short_prompts(db)
    tokens = rows[0][0]
    assert 0 < tokens < 17
    # the second and third requests repeat their predecessor: below_minimum breaks, not new ones
    assert rows == [
        (tokens, 0, "below_minimum", 0),
        (tokens, 0, "below_minimum", 1),
        (tokens, 0, "below_minimum", 1),
    ]
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute(BREAKS).fetchall() == [(3, 0)]
    started = time.time() - 3600
    whole = build_report(db, since=started - 7200, until=time.time() + 7200)
    inside = build_report(db, since=started, until=time.time() + 1)  # read from the rows
    for report in (whole, inside):
        (reason,) = report.break_reasons
        assert (reason.reason, reason.breaks, reason.tokens_lost) == ("below_minimum", 3, 0)
        assert Decimal(str(reason.usd_lost or 0)) == 0


def test_step_18_takes_the_tokens_lost_out_of_a_logged_below_minimum_break(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    rows = _log_short_prompts(db)
    tokens = rows[0][0]
    log = open_log(db)
    with log.conn:  # a log at step 17: the two breaks with a predecessor lost its whole input
        log.conn.execute(
            "UPDATE report_breaks_hourly SET tokens_lost = ? WHERE reason = 'below_minimum'",
            (2 * tokens,),
        )
        log.conn.execute("DELETE FROM schema_version WHERE version >= 18")
    log.close()
    open_log(db).close()  # migrates
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute(BREAKS).fetchall() == [(3, 0)]


def test_breaks_that_lose_nothing_ask_for_no_fix_at_a_high_hit_rate(tmp_path: Path) -> None:
    # most input is read from cache; the short prompts' breaks re-process nothing cacheable, so
    # "cache breaks still re-process input" would not be true
    db = tmp_path / "log.db"
    _log_short_prompts(db, repeats=4)
    report = build_report(db, since=time.time() - 3600, until=time.time() + 1)
    assert report.total.token_hit_rate is not None and report.total.token_hit_rate > 0.5
    assert [(r.reason, r.breaks, r.tokens_lost) for r in report.break_reasons] == [
        ("below_minimum", 3, 0)
    ]
    assert [r.kind for r in report.recommendations] == []
