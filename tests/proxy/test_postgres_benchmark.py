"""``benchmarks/report_speed.py --postgres URL`` in a quick mode, on the session's real Postgres
server: it loads the log with COPY, reports, runs the writer fleet, and the counts it prints
match the database's own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from promptcache.proxy.store_postgres import PgConnection

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "report_speed.py"


def test_report_speed_postgres_mode(pg_url: str) -> None:
    args = ["--postgres", pg_url, "--rows", "3000", "--repeats", "1",
            "--fleet-rate", "400", "--fleet-seconds", "2"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(r"^loaded 3,000 rows with COPY in \d+\.\d s$", out, re.M), out
    for step in (
        "build_report",
        "build_report --group-by day",
        "baseline: totals over the raw rows",
    ):
        assert re.search(rf"^{re.escape(step)} +\d+\.\d{{3}} +\d+\.\d\dx$", out, re.M), out
    assert "requests 3,000," in out
    fleet = re.search(
        r"^writer fleet: 4 writers, ([\d,]+) rows/s submitted for 2 s: ([\d,]+) submitted, "
        r"([\d,]+) written, (\d+) dropped, (\d+) failed; ([\d,]+) new rows in the log",
        out,
        re.M,
    )
    assert fleet is not None, out
    submitted, written, dropped, failed, new = (
        int(fleet.group(i).replace(",", "")) for i in (2, 3, 4, 5, 6)
    )
    assert submitted == 800 and (written, dropped, failed) == (800, 0, 0)
    with PgConnection(pg_url) as conn:
        count = conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
        writers = conn.execute("SELECT COUNT(*) FROM requests WHERE id LIKE 'w%'").fetchone()[0]
    assert new == writers == 800
    assert count == 3000 + 800
