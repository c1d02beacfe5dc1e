"""Prefix families: requests grouped by the prefix they share, not by their first segment.

The naive demo app's shape through a real proxy on 127.0.0.1 (the official ``openai`` client,
the mock upstream): three users, four turns each, every system prompt opening with the current
time and a new request id before the same instructions. Its first segment changes on every
request (and each user's ends with their child's name), yet the twelve requests are one family
with its breaks. A second app (another system
prompt) on the same key and model stays a family of its own. A log written before schema step
9 is migrated to the same grouping.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import openai
from proxy_support import FakeClock, RunningProxy, log_at_version

from promptcache.proxy.report import build_report
from promptcache.proxy.report.page import build_page
from promptcache.proxy.store import SCHEMA_VERSION

T0 = 1_764_493_200.0  # 2025-11-30 09:00:00 UTC
KEY = "sk-proj-families-0123456789abcdef"
INSTRUCTIONS = "You are StoryTime. Tell one short bedtime story turn at a time. " * 40
CHILD = ["The child is Mia, age 5.", "The child is Bob, age 7.", "The child is Ada, age 4."]
OTHER_APP = "Translate the user's text into French, keeping its formatting exactly. " * 40


def _system(i: int) -> str:
    return f"Current time: 09:{i:02d}:{7 * i % 60:02d}. Request id: {i * 7919:012x}.\n"


def _send(proxy: RunningProxy, clock: FakeClock) -> None:
    with openai.OpenAI(base_url=proxy.url + "/v1", api_key=KEY, max_retries=0) as client:
        for i in range(12):
            user, turn = i % 3, i // 3
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": _system(i) + INSTRUCTIONS + CHILD[user]}
            ]
            for t in range(turn + 1):
                messages.append({"role": "user", "content": f"user {user} question {t}"})
                if t < turn:
                    messages.append({"role": "assistant", "content": f"answer {t} " * 10})
            clock.now = T0 + 10 * i
            client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
        clock.now = T0 + 130
        other = [{"role": "system", "content": OTHER_APP}, {"role": "user", "content": "Hi"}]
        client.chat.completions.create(model="gpt-4o", messages=other)  # type: ignore[arg-type]


def _families(db: Path) -> list[tuple[int, str | None, int]]:
    report = build_report(db, since=T0, until=T0 + 3600, now=T0 + 7200)
    page = build_page(report)
    return sorted(((f.requests, f.top_reason, f.top_reason_breaks) for f in page.families),
                  reverse=True)  # fmt: skip


def test_a_prompt_whose_first_segment_changes_every_request_is_one_family(
    start_proxy: Callable[..., RunningProxy], tmp_path: Path
) -> None:
    clock = FakeClock(T0)
    proxy = start_proxy(clock=clock)
    _send(proxy, clock)
    rows = proxy.rows(13)
    naive, other = rows[:12], rows[12]
    assert len({r["first_segment_hash"] for r in naive}) == 12  # a new first segment each time
    assert naive[0]["break_reason"] == "new_prefix"
    assert {r["break_reason"] for r in naive[1:]} == {"system_changed"}
    assert {r["prefix_family"] for r in naive} == {naive[0]["first_segment_hash"]}
    assert other["break_reason"] == "new_prefix"
    assert other["prefix_family"] == other["first_segment_hash"]

    # one family of 12 with its 11 breaks, and the other app's own family
    assert _families(proxy.db_path) == [(12, "system_changed", 11), (1, None, 0)]

    # the same rows in a log of schema step 8 (no prefix_family): migrated to the same families
    old = tmp_path / "v8.db"
    db = log_at_version(old, 8)
    columns = db.table("requests").columns_dict
    with db.conn:
        db.table("requests").insert_all([{k: r[k] for k in r if k in columns} for r in rows])
    db.close()
    assert _families(old) == _families(proxy.db_path)
    with closing(sqlite3.connect(old)) as conn:
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        families = dict(conn.execute("SELECT id, prefix_family FROM requests").fetchall())
    assert version == SCHEMA_VERSION
    assert families == {r["id"]: r["prefix_family"] for r in rows}
