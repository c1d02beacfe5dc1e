"""How long ``promptcache report`` takes on a large proxy log (target: 1M rows in under 5 s).

Generates ``--rows`` synthetic requests (default 1,000,000) into a real SQLite file created by the
proxy's own migrations (so the indexes are the real ones), then times, as medians over
``--repeats`` runs in this one process:

- ``build_report`` (every aggregate, no grouping) and with ``--group-by model`` / ``day``;
- each renderer (table, JSON, CSV, HTML) on the built report;
- the log writer's insert rate with and without the rollup triggers (``--writer-rows`` of the
  rows, default 30,000, in batches of 500 as the proxy's writer does), the price paid off the
  request path;
- a baseline measured in the same run (once: it is slow): the same totals computed in a Python
  loop over ``SELECT * ...`` (what "aggregate in SQL" avoids).

The traffic: 2,000 prefix families over 40 API keys and 4 models, 7 days, a request every
~0.6 s; about 12% of requests are cache breaks with a reason, 3% errors, costs priced with the
bundled price table. Deterministic (seeded).

Usage::

    .venv/bin/python benchmarks/report_speed.py            # 1M rows: ~3 min to generate
    .venv/bin/python benchmarks/report_speed.py --rows 100000 --repeats 3
    .venv/bin/python benchmarks/report_speed.py --rows 2000 --repeats 1 --writer-rows 500  # smoke
    .venv/bin/python benchmarks/report_speed.py --db /tmp/1m.db          # keep the log...
    .venv/bin/python benchmarks/report_speed.py --db /tmp/1m.db --reuse  # ...and time it again
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from promptcache.pricing import lookup_price
from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import build_report
from promptcache.proxy.report.html import render_html
from promptcache.proxy.report.render import render_csv, render_json, render_table
from promptcache.proxy.store import open_log

MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5", "gemini-2.5-flash")
VENDOR = {"claude-sonnet-4-5": "anthropic", "claude-haiku-4-5": "anthropic", "gpt-5": "openai",
          "gemini-2.5-flash": "gemini"}  # fmt: skip
ROUTE = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions",
         "gemini": "/v1beta/models/gemini-2.5-flash:generateContent"}  # fmt: skip
REASONS = ("system_changed", "tools_reordered", "tools_changed", "history_rewritten",
           "messages_changed", "ttl_expired", "model_changed")  # fmt: skip
SPAN_S = 7 * 86400


def generate(path: Path, rows: int, seed: int = 7) -> None:
    """Write ``rows`` synthetic requests into a fresh log at ``path``."""
    rng = random.Random(seed)
    db = open_log(path)
    conn = db.conn
    rates = {m: lookup_price(m) for m in MODELS}
    families = []
    for f in range(2000):
        model = MODELS[f % len(MODELS)]
        families.append(
            {
                "key": f"{f % 40:016x}",
                "model": model,
                "first": uuid.UUID(int=rng.getrandbits(128)).hex * 2,
                "prefix": rng.choice((1200, 3000, 8000, 20000)),
                "last_id": None,
            }
        )
    start = time.time() - SPAN_S
    placeholders = ", ".join("?" for _ in COLUMN_NAMES)
    insert = f"INSERT INTO requests ({', '.join(COLUMN_NAMES)}) VALUES ({placeholders})"
    batch = []
    t = start
    for i in range(rows):
        t += rng.expovariate(rows / SPAN_S)
        fam = families[int(rng.paretovariate(1.2)) % len(families)]
        model, vendor = fam["model"], VENDOR[fam["model"]]
        row = dict.fromkeys(COLUMN_NAMES)
        rid = f"{i:032x}"
        row.update(id=rid, started_at=t, vendor=vendor, api="anthropic", route=ROUTE[vendor],
                   upstream=vendor, model=model, key_fingerprint=fam["key"], stream=i % 2,
                   first_segment_hash=fam["first"], approx_prefix_tokens=fam["prefix"])  # fmt: skip
        if rng.random() < 0.03:
            row.update(status=529 if i % 2 else 0, error="upstream overloaded")
            batch.append(tuple(row[c] for c in COLUMN_NAMES))
            continue
        broke = fam["last_id"] is None or rng.random() < 0.12
        prefix, tail = fam["prefix"], rng.randint(50, 2000)
        read, write = (0, prefix) if broke else (prefix, rng.choice((0, 0, 0, tail)))
        uncached = tail if write == 0 or broke else 0
        one_hour = fam["prefix"] == 20000 and vendor == "anthropic"
        w5, w1 = (0, write) if one_hour else (write, 0)
        out = rng.randint(20, 800)
        price = rates[model]
        cost = (uncached * price.input + read * price.cache_read + w5 * price.cache_write_5m
                + w1 * price.cache_write_1h + out * price.output) / 1_000_000  # fmt: skip
        without = ((uncached + read + write) * price.input + out * price.output) / 1_000_000
        ttft = rng.lognormvariate(5.2 if read else 6.3, 0.4)
        row.update(
            status=200, first_byte_at=t + ttft / 1000, ended_at=t + ttft / 1000 + 2.0,
            ttft_ms=ttft, latency_ms=ttft + 2000.0, uncached_input_tokens=uncached,
            cache_read_tokens=read, cache_write_5m_tokens=w5, cache_write_1h_tokens=w1,
            cache_write_unknown_tokens=0, output_tokens=out, reasoning_tokens=0,
            total_input_tokens=uncached + read + write, cost_usd=str(cost),
            cost_without_cache_usd=str(without), previous_request_id=fam["last_id"],
            breakpoints=json.dumps([{"path": "system[0]", "ttl": "1h" if one_hour else "5m"}]),
            expected_hit=int(not broke), unexpected_miss=0,
        )  # fmt: skip
        if broke and fam["last_id"] is not None:
            reason = rng.choice(REASONS)
            row.update(break_reason=reason, break_segment={
                "system_changed": "system[0].text", "tools_reordered": "tools[0].name",
                "tools_changed": "tools[2].input_schema", "history_rewritten": "messages[1]",
                "messages_changed": "messages[5].content"}.get(reason),
                break_offset=rng.randint(0, 5000))  # fmt: skip
        elif broke:
            row.update(break_reason="new_prefix")
        fam["last_id"] = rid
        batch.append(tuple(row[c] for c in COLUMN_NAMES))
        if len(batch) >= 50_000:
            with conn:
                conn.executemany(insert, batch)
            batch.clear()
    with conn:
        conn.executemany(insert, batch)
    conn.execute("ANALYZE")
    db.close()


def _window(path: Path) -> tuple[float, float]:
    """A ``since``, ``until`` that holds every request of the log (the generated starts are a
    random walk, so they need not span exactly ``SPAN_S``)."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        first, last = conn.execute(
            "SELECT MIN(started_at), MAX(started_at) FROM requests"
        ).fetchone()
    finally:
        conn.close()
    return float(first) - 1, float(last) + 1


def python_loop_totals(path: Path, since: float, until: float) -> dict[str, float]:
    """Baseline: the summary totals computed row by row in Python."""
    import sqlite3

    conn = sqlite3.connect(path)
    totals = {"requests": 0.0, "read": 0.0, "input": 0.0, "cost": 0.0, "without": 0.0}
    sql = "SELECT * FROM requests WHERE started_at >= ? AND started_at < ?"
    cursor = conn.execute(sql, (since, until))
    names = [d[0] for d in cursor.description]
    for values in cursor:
        row = dict(zip(names, values, strict=True))
        totals["requests"] += 1
        totals["read"] += row["cache_read_tokens"] or 0
        totals["input"] += row["total_input_tokens"] or 0
        totals["cost"] += float(row["cost_usd"] or 0)
        totals["without"] += float(row["cost_without_cache_usd"] or 0)
    conn.close()
    return totals


def writer_throughput(source: Path, rows: int, repeats: int) -> dict[str, float]:
    """Rows/s the proxy's writer can insert (batches of 500, WAL) with and without the rollup
    triggers: a log created by ``open_log`` (the current schema), as is and with every trigger
    on ``requests`` dropped (the same columns and indexes, no rollups kept up to date)."""
    import sqlite3

    names = ", ".join(COLUMN_NAMES)
    src = sqlite3.connect(source)
    try:
        data = src.execute(
            f"SELECT {names} FROM requests ORDER BY started_at LIMIT ?", (rows,)
        ).fetchall()
    finally:
        src.close()
    insert = f"INSERT INTO requests ({names}) VALUES ({', '.join('?' for _ in COLUMN_NAMES)})"
    out: dict[str, list[float]] = {"without rollup triggers": [], "with rollup triggers": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            for label in out:
                db = open_log(Path(tmp) / f"{i}-{len(label)}.db")
                if label == "without rollup triggers":
                    triggers = db.conn.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'trigger'"
                        " AND tbl_name = 'requests'"
                    ).fetchall()
                    for (name,) in triggers:
                        db.conn.execute(f'DROP TRIGGER "{name}"')
                    db.conn.commit()
                t0 = time.perf_counter()
                for start in range(0, len(data), 500):
                    with db.conn:
                        db.conn.executemany(insert, data[start : start + 500])
                out[label].append(len(data) / (time.perf_counter() - t0))
                db.close()
    return {label: statistics.median(values) for label, values in out.items()}


def median_s(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--writer-rows", type=int, default=30_000, help="rows per writer-throughput run"
    )
    parser.add_argument("--db", type=Path, default=None, help="keep the generated log here")
    parser.add_argument(
        "--reuse", action="store_true", help="time an existing --db instead of generating one"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "bench.db"
        if args.reuse and path.exists():
            print(f"reusing {path} ({path.stat().st_size / 2**20:.0f} MiB)")
        else:
            path.unlink(missing_ok=True)
            t0 = time.perf_counter()
            generate(path, args.rows)
            print(
                f"generated {args.rows:,} rows in {time.perf_counter() - t0:.1f} s "
                f"({path.stat().st_size / 2**20:.0f} MiB)"
            )
        since, until = _window(path)
        report = build_report(path, since=since, until=until)
        results = {
            "build_report": median_s(lambda: build_report(path, since=since, until=until),
                                     args.repeats),
            "build_report --group-by model": median_s(
                lambda: build_report(path, since=since, until=until, group_by="model"),
                args.repeats),
            "build_report --group-by day": median_s(
                lambda: build_report(path, since=since, until=until, group_by="day"),
                args.repeats),
            "render table": median_s(lambda: render_table(report), args.repeats),
            "render json": median_s(lambda: render_json(report), args.repeats),
            "render csv": median_s(lambda: render_csv(report), args.repeats),
            "render html": median_s(lambda: render_html(report), args.repeats),
            "baseline: totals in a Python loop": median_s(
                lambda: python_loop_totals(path, since, until), 1),
        }  # fmt: skip
        base = results["baseline: totals in a Python loop"]
        print(f"{'step':<36} {'median s':>9} {'vs baseline':>12}")
        for name, seconds in results.items():
            print(f"{name:<36} {seconds:>9.3f} {seconds / base:>11.2f}x")
        for label, rate in writer_throughput(path, args.writer_rows, args.repeats).items():
            print(f"writer, {label:<28} {rate:>9,.0f} rows/s")
        print(f"requests {report.total.requests:,}, token hit rate "
              f"{report.total.token_hit_rate:.1%}, breaks {report.total.breaks:,}")  # fmt: skip


if __name__ == "__main__":
    main()
