"""benchmarks/proxy_cpu_split.py as a user runs it: bad numbers are usage errors, and a small run
measures every request it sent (a real proxy in front of real mock replicas on 127.0.0.1)."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "proxy_cpu_split.py"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replicas", "1"], "argument --replicas: 1 is below 2: pass 2 or more"),
        (["--requests", "-5"], "argument --requests: -5 is below 1: pass 1 or more"),
        (["--concurrency", "x"], "argument --concurrency: 'x' is not a whole number"),
        (["--idle-s", "0"], "argument --idle-s: 0 is below 1: pass 1 or more"),
        (["--trigger-batch", "2.5"], "argument --trigger-batch: '2.5' is not a whole number"),
        (["--trigger-batch", "1e999"], "argument --trigger-batch: '1e999' is not a whole number"),
        (["--event-gap-ms", "nan"], "argument --event-gap-ms: 'nan' is not a finite number"),
        (["--idle-s", "inf"], "argument --idle-s: 'inf' is not a finite number"),
        (["--callgrind", "0"], "argument --callgrind: 0 is below 1: pass 1 or more"),
    ],
)
def test_bad_numbers_are_usage_errors(args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_minus_zero_is_read_as_zero() -> None:
    """``--event-gap-ms -0`` is 0, so the banner says "0 ms apart", not "-0 ms"."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import proxy_cpu_split
    finally:
        sys.path.remove(str(SCRIPT.parent))
    value = proxy_cpu_split._at_least(0, float)("-0")
    assert f"{value:g}" == "0"


@pytest.mark.parametrize("workload", ["chat", "rag"])
def test_a_small_run_measures_every_request(workload: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--replicas", "2", "--requests", "6", "--concurrency", "2",
         "--idle-s", "1", "--event-gap-ms", "0", "--workload", workload],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"6 {workload} requests at concurrency 2" in done.stdout.splitlines()[0]
    lines = [line for line in done.stdout.splitlines() if line.startswith("proxy, ")]
    assert [line.split()[1] for line in lines] == ["--db", "--no-log"]
    for line in lines:
        assert line.endswith("(6 requests whole)")
        total, loop, others = (float(x) for x in re.findall(r"([0-9.]+) ms(?!/s)", line)[:3])
        assert total == pytest.approx(loop + others, abs=0.011)


def test_trigger_costs_insert_every_row_with_each_trigger_set(tmp_path: Path) -> None:
    """``--trigger-costs`` on a small real log: every row inserted again (the function checks
    the count in each fresh log), one figure for all triggers, none, each insert trigger, and
    the proxy writer's way."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import proxy_cpu_split
    finally:
        sys.path.remove(str(SCRIPT.parent))
    from promptcache.proxy.record import RequestRecord
    from promptcache.proxy.store import _insert, open_log

    source = tmp_path / "log.db"
    db = open_log(source)
    rows = [
        RequestRecord(id=uuid.uuid4().hex, started_at=1_000.0 + i, status=200).as_row()
        for i in range(7)
    ]
    _insert(db, rows)
    names = sorted(
        n
        for (n,) in db.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'requests'"
            " AND sql LIKE '%AFTER INSERT%'"
        )
    )
    db.close()
    count, costs = proxy_cpu_split.trigger_costs(source, batch=3, repeats=1)
    assert count == 7
    assert [label for label, _ in costs] == [
        "all triggers",
        "no triggers",
        *(f"without {n}" for n in names),
        "the writer's batches",
    ]
    assert len(names) >= 7
