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
import itertools
import json
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
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
    db = open_log(path)
    conn = db.conn
    placeholders = ", ".join("?" for _ in COLUMN_NAMES)
    insert = f"INSERT INTO requests ({', '.join(COLUMN_NAMES)}) VALUES ({placeholders})"
    batch = []
    for values in synthetic_rows(rows, seed):
        batch.append(values)
        if len(batch) >= 50_000:
            with conn:
                conn.executemany(insert, batch)
            batch.clear()
    with conn:
        conn.executemany(insert, batch)
    conn.execute("ANALYZE")
    db.close()


def synthetic_rows(rows: int, seed: int = 7) -> Iterator[tuple[object, ...]]:
    """``rows`` synthetic requests (values in ``COLUMN_NAMES`` order), oldest first."""
    rng = random.Random(seed)
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
            yield tuple(row[c] for c in COLUMN_NAMES)
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
        yield tuple(row[c] for c in COLUMN_NAMES)


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


# ------------------------------------------------------------------------------- Postgres

#: Rows per COPY statement when loading a Postgres log (one rollup upsert per statement).
COPY_ROWS = 200_000


def generate_postgres(url: str, rows: int, seed: int = 7) -> None:
    """Load ``rows`` synthetic requests into the (empty) Postgres database ``url``: up to 1M
    generated rows with ``COPY`` (``COPY_ROWS`` per statement), and for larger logs repeats of
    them made by the server (``INSERT ... SELECT``), each moved one traffic span earlier with its
    own ids, so the log keeps the same per-hour density over a longer time. Every statement
    runs the rollup triggers, as the proxy's writer does."""
    from promptcache.proxy.store_postgres import connect

    open_log(url).close()  # the schema, by the proxy's own migrations
    base = min(rows, 1_000_000)
    source = synthetic_rows(base, seed)
    names = ", ".join(COLUMN_NAMES)
    with connect(url) as conn:
        while True:
            count = 0
            with conn.cursor() as cursor, cursor.copy(
                f"COPY requests ({names}) FROM STDIN".encode()
            ) as copy:
                for values in itertools.islice(source, COPY_ROWS):
                    copy.write_row(values)
                    count += 1
            conn.commit()
            if count < COPY_ROWS:
                break
        sql = b"SELECT MIN(started_at), MAX(started_at) FROM requests"
        first, last = conn.execute(sql).fetchone()
        span = float(last) - float(first) + 3600
        shifted = {
            "id": "%(prefix)s || substr(id, 5)",
            "previous_request_id": "%(prefix)s || substr(previous_request_id, 5)",
            **{c: f"{c} - %(shift)s" for c in ("started_at", "first_byte_at", "ended_at")},
        }
        values = ", ".join(shifted.get(c, c) for c in COLUMN_NAMES)
        for copy_index in range(1, -(-rows // base)):
            conn.execute(
                f"INSERT INTO requests ({names}) SELECT {values} FROM requests"
                " WHERE id LIKE '0000%%' ORDER BY started_at LIMIT %(limit)s",
                {"prefix": f"{copy_index:04x}", "shift": copy_index * span,
                 "limit": min(base, rows - copy_index * base)},
            )  # fmt: skip
            conn.commit()
    with connect(url, autocommit=True) as maintenance:
        maintenance.execute("VACUUM (ANALYZE) requests")
        for table in ("report_hourly", "report_breaks_hourly", "report_family_hourly",
                      "report_replica_hourly", "report_ttft_hourly",
                      "report_family_gaps_hourly"):  # fmt: skip
            maintenance.execute(f"VACUUM (ANALYZE) {table}".encode())


def postgres_window(url: str) -> tuple[float, float]:
    from promptcache.proxy.store_postgres import PgConnection

    with PgConnection(url) as conn:
        sql = "SELECT MIN(started_at), MAX(started_at) FROM requests"
        first, last = conn.execute(sql).fetchone()
    return float(first) - 1, float(last) + 1


def postgres_raw_totals(url: str, since: float, until: float) -> tuple[float, ...]:
    """Anchor: the summary totals summed by Postgres over the raw rows (no rollups)."""
    from promptcache.proxy.store_postgres import PgConnection

    with PgConnection(url) as conn:
        return tuple(
            conn.execute(
                "SELECT COUNT(*), SUM(cache_read_tokens), SUM(total_input_tokens),"
                " SUM(CAST(cost_usd AS REAL)), SUM(CAST(cost_without_cache_usd AS REAL))"
                " FROM requests WHERE started_at >= ? AND started_at < ?",
                (since, until),
            ).fetchone()
        )


FLEET_WRITER = """
import json, sys, time
sys.path.insert(0, sys.argv[5])
from report_speed import COLUMN_NAMES, synthetic_rows
from promptcache.proxy.store import RequestStore
url, rate, seconds, writer = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rows = []
for values in synthetic_rows(int(rate * seconds), seed=100 + int(writer)):
    row = dict(zip(COLUMN_NAMES, values))
    row["id"] = f"w{writer}-" + row["id"]
    if row["previous_request_id"] is not None:
        row["previous_request_id"] = f"w{writer}-" + row["previous_request_id"]
    rows.append(row)
store = RequestStore(url)  # the proxy's writer, with the proxy's defaults
store.start()
print("ready", flush=True)
sys.stdin.readline()
start = time.monotonic()
for i, row in enumerate(rows):
    wait = start + i / rate - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    row["started_at"] = time.time()
    store.submit(row)
sent_s = time.monotonic() - start
store.close()
print(json.dumps({"submitted": len(rows), "written": store.written_rows,
                  "dropped": store.dropped_rows, "failed": store.failed_rows,
                  "seconds": sent_s, "drained_s": time.monotonic() - start}))
"""


def writer_fleet(url: str, writers: int, rate: float, seconds: float) -> dict[str, float]:
    """``writers`` processes, each the proxy's log writer (``RequestStore``, default batch and
    flush settings), submit ``rate`` rows/s each for ``seconds`` into the Postgres log at once.
    Returns the rows submitted, written, dropped and failed, the aggregate rate submitted, and
    how many new rows the log holds afterwards."""
    import subprocess
    import sys

    from promptcache.proxy.store_postgres import PgConnection

    with PgConnection(url) as conn:
        before = int(conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
    here = str(Path(__file__).resolve().parent)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", FLEET_WRITER, url, str(rate), str(seconds), str(w), here],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        for w in range(writers)
    ]  # fmt: skip
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [json.loads(proc.communicate(timeout=seconds * 10 + 120)[0]) for proc in procs]
    with PgConnection(url) as conn:
        after = int(conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
    total = {k: sum(r[k] for r in results) for k in ("submitted", "written", "dropped", "failed")}
    return {
        **total,
        "rows/s submitted": total["submitted"] / max(r["seconds"] for r in results),
        "new rows in the log": after - before,
        "slowest drain s": max(r["drained_s"] for r in results),
    }


def slowest_queries(url: str, since: float, until: float, n: int) -> list[tuple[float, str]]:
    """The ``n`` slowest statements of one ``build_report`` on ``url`` (seconds, SQL start)."""
    from promptcache.proxy.store_postgres import PgConnection

    timed: list[tuple[float, str]] = []
    execute = PgConnection.execute

    def timing(self: PgConnection, sql: str, params: object = None) -> object:
        t0 = time.perf_counter()
        result = execute(self, sql, params)  # type: ignore[arg-type]
        timed.append((time.perf_counter() - t0, " ".join(sql.split())[:90]))
        return result

    PgConnection.execute = timing  # type: ignore[assignment,method-assign]
    try:
        build_report(url, since=since, until=until)
    finally:
        PgConnection.execute = execute  # type: ignore[method-assign]
    return sorted(timed, reverse=True)[:n]


def postgres_main(args: argparse.Namespace) -> None:
    """``--postgres URL``: the same report timings on a Postgres log, then the writer fleet."""
    url = args.postgres
    if not args.reuse:
        t0 = time.perf_counter()
        generate_postgres(url, args.rows)
        print(f"loaded {args.rows:,} rows with COPY in {time.perf_counter() - t0:.1f} s")
    since, until = postgres_window(url)
    report = build_report(url, since=since, until=until)
    results = {
        "build_report": median_s(lambda: build_report(url, since=since, until=until),
                                 args.repeats),
        "build_report --group-by model": median_s(
            lambda: build_report(url, since=since, until=until, group_by="model"), args.repeats),
        "build_report --group-by day": median_s(
            lambda: build_report(url, since=since, until=until, group_by="day"), args.repeats),
        "baseline: totals over the raw rows": median_s(
            lambda: postgres_raw_totals(url, since, until), 1),
    }  # fmt: skip
    base = results["baseline: totals over the raw rows"]
    print(f"{'step':<36} {'median s':>9} {'vs baseline':>12}")
    for name, seconds in results.items():
        print(f"{name:<36} {seconds:>9.3f} {seconds / base:>11.2f}x")
    print(f"requests {report.total.requests:,}, token hit rate "
          f"{report.total.token_hit_rate:.1%}, breaks {report.total.breaks:,}")  # fmt: skip
    if args.queries:
        for seconds, sql in slowest_queries(url, since, until, args.queries):
            print(f"query {seconds:8.3f} s  {sql}")
    if args.fleet_seconds > 0:
        fleet = writer_fleet(url, 4, args.fleet_rate / 4, args.fleet_seconds)
        print(
            f"writer fleet: 4 writers, {fleet['rows/s submitted']:,.0f} rows/s submitted for "
            f"{args.fleet_seconds:g} s: {fleet['submitted']:,} submitted, "
            f"{fleet['written']:,} written, {fleet['dropped']:,} dropped, "
            f"{fleet['failed']:,} failed; {fleet['new rows in the log']:,} new rows in the log; "
            f"slowest writer drained {fleet['slowest drain s']:.1f} s after its start"
        )


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
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="time a Postgres log instead: load --rows into this empty database with COPY "
        "(or --reuse what it holds), then run the writer fleet",
    )
    parser.add_argument("--fleet-rate", type=float, default=2000, help="rows/s, all 4 writers")
    parser.add_argument("--fleet-seconds", type=float, default=30, help="0: no writer fleet")
    parser.add_argument(
        "--queries", type=int, default=0, help="--postgres: list the N slowest report queries"
    )
    args = parser.parse_args()
    if args.postgres:
        postgres_main(args)
        return
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
