"""A two-minute proxy log for the HTML report's page tests: real SQLite, every column.

40 Anthropic requests, one every 3 s from :data:`T0`, each with the layout ``tools[0]``,
``tools[1]``, ``system[0]`` (breakpoint, 5m), then 2 to 5 messages. Request ``i``:

- breaks when ``i % 4 == 1`` (``system_changed`` in ``system[0].text`` at offset 40, with an
  excerpt), ``i % 10 == 3`` (``tools_reordered`` in ``tools[0].name`` at offset 9),
  ``i == 20`` (``ttl_expired``, no segment); ``i == 0`` is a ``new_prefix`` (not a break);
- otherwise hits: reads 900 of its 1,000 input tokens;
- TTFT ``100 + 10 * i`` ms for hits, ``400 + 20 * i`` ms for misses;
- family: first segment hash ``fam-a`` for even ``i``, ``fam-b`` for odd;
- segments logged with their token counts (a quarter of their characters), as the proxy logs
  them since 2026-12-01 (:func:`without_segment_tokens` rewrites a log as older ones were).

Model names and excerpts carry markup (:data:`HOSTILE`) that the page must escape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.store import open_log

T0 = 1_764_493_200.0  # 2025-11-30 09:00 UTC
N = 40
STEP_S = 3.0
HOSTILE = '<img src=x onerror="document.title=1">'
MODEL = "claude-sonnet-4-5"


def reason_of(i: int) -> str | None:
    if i == 0:
        return "new_prefix"
    if i == 20:
        return "ttl_expired"
    if i % 4 == 1:
        return "system_changed"
    if i % 10 == 3:
        return "tools_reordered"
    return None


def is_hit(i: int) -> bool:
    return reason_of(i) is None


def ttft_ms(i: int) -> float:
    return 100.0 + 10 * i if is_hit(i) else 400.0 + 20 * i


def cost(i: int) -> tuple[float, float]:
    """(cost, cost without cache) USD at claude-sonnet-4-5 rates ($3 in, $0.30 read, $3.75
    5m write, $15 out per million tokens): hits read 900, misses write 900; 100 uncached in,
    50 out."""
    out = 50 * 15
    if is_hit(i):
        return (100 * 3 + 900 * 0.3 + out) / 1e6, (1000 * 3 + out) / 1e6
    return (100 * 3 + 900 * 3.75 + out) / 1e6, (1000 * 3 + out) / 1e6


def segments(i: int) -> list[dict[str, Any]]:
    layout = [("tools[0]", "tools", 400), ("tools[1]", "tools", 400), ("system[0]", "system", 1200)]
    layout += [(f"messages[{m}]", "messages", 200) for m in range(2 + i % 4)]
    return [
        {"path": p, "kind": k, "sha256": f"{p}-{i}", "num_chars": c, "num_tokens": c // 4}
        for p, k, c in layout
    ]


def row(i: int) -> dict[str, Any]:
    reason = reason_of(i)
    segment = {"system_changed": "system[0].text", "tools_reordered": "tools[0].name"}.get(
        reason or ""
    )
    excerpt = None
    offset = None
    if reason == "system_changed":
        offset = 40
        excerpt = (
            f"-Current time: 09:00:{i - 1:02d}. {HOSTILE}\n+Current time: 09:00:{i:02d}. {HOSTILE}"
        )
    elif reason == "tools_reordered":
        offset = 9
        excerpt = '-{"name":"alpha","description"\n+{"name":"beta","description"'
    c, c0 = cost(i)
    values = dict.fromkeys(COLUMN_NAMES)
    values.update(
        id=f"r{i:02d}",
        started_at=T0 + i * STEP_S,
        vendor="anthropic",
        api="anthropic",
        route="/v1/messages",
        model=MODEL,
        key_fingerprint="k1",
        first_segment_hash="fam-a" if i % 2 == 0 else "fam-b",
        segment_hashes=json.dumps(segments(i)),
        breakpoints=json.dumps([{"path": "system[0]", "ttl": "5m"}]),
        approx_prefix_tokens=sum(s["num_tokens"] for s in segments(i)),
        status=200,
        stream=1,
        ttft_ms=ttft_ms(i),
        uncached_input_tokens=100,
        cache_read_tokens=900 if is_hit(i) else 0,
        cache_write_5m_tokens=0 if is_hit(i) else 900,
        cache_write_1h_tokens=0,
        cache_write_unknown_tokens=0,
        output_tokens=50,
        total_input_tokens=1000,
        cost_usd=repr(c),
        cost_without_cache_usd=repr(c0),
        break_reason=reason,
        break_segment=segment,
        break_offset=offset,
        break_excerpt=excerpt,
        previous_request_id=f"r{i - 1:02d}" if i else None,
    )
    return values


def write_page_log(path: Path) -> Path:
    """Write the log to ``path`` (a new file) and return it."""
    db = open_log(path)
    with db.conn:
        db.table("requests").insert_all([row(i) for i in range(N)])
    db.close()
    return path


def without_segment_tokens(path: Path) -> Path:
    """Drop ``num_tokens`` from every row's ``segment_hashes`` (a log of an older proxy)."""
    db = Database(path)
    with db.conn:
        for rid, text in db.execute("SELECT id, segment_hashes FROM requests").fetchall():
            stripped = [{k: v for k, v in s.items() if k != "num_tokens"} for s in json.loads(text)]
            db.execute(
                "UPDATE requests SET segment_hashes = ? WHERE id = ?", [json.dumps(stripped), rid]
            )
    db.close()
    return path
