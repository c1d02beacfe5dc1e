"""``benchmarks/report_speed.py`` in a quick mode: it runs to its end on the current schema, and
the log it generates is the proxy's own (every column, the latest schema version)."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.store import SCHEMA_VERSION

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "report_speed.py"


def test_report_speed_runs_to_the_end(tmp_path: Path) -> None:
    db = tmp_path / "bench.db"
    args = ["--rows", "2000", "--repeats", "1", "--writer-rows", "500", "--db", str(db)]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "generated 2,000 rows" in out
    for step in ("build_report", "render html", "baseline: totals in a Python loop"):
        assert re.search(rf"^{re.escape(step)} +\d+\.\d{{3}} +\d+\.\d\dx$", out, re.M), out
    rates = re.findall(r"^writer, (with|without) rollup triggers +([\d,]+) rows/s$", out, re.M)
    assert sorted(kind for kind, _ in rates) == ["with", "without"], out
    assert all(int(rate.replace(",", "")) > 0 for _, rate in rates)
    assert "requests 2,000," in out

    conn = sqlite3.connect(db)
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(requests)")}
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        count = conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    finally:
        conn.close()
    assert set(COLUMN_NAMES) <= columns
    assert version == SCHEMA_VERSION
    assert count == 2000
