"""benchmarks/engine_tier_copies.py as a user runs it: a request count below 1, or one whose
block files (64 of 720 KiB each per request, in a temporary directory) would not fit in the
free space there, is a usage error (exit 2, one line, nothing written); a one-request run
prints its request's line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "engine_tier_copies.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        ("0", "--requests must be at least 1, got 0"),
        ("-3", "--requests must be at least 1, got -3"),
        ("x", "argument --requests: invalid int value: 'x'"),
        # 64 blocks of 737,280 bytes a request: 45 MiB, so 10**9 requests need 43,945,312.5 GiB
        ("1000000000", "--requests 1000000000 writes 43945312.5 GiB of block files to "),
    ],
)
def test_bad_request_counts_are_usage_errors(requests: str, message: str) -> None:
    done = run("--requests", requests)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("engine_tier_copies.py: error: ") and message in last, done.stderr


def test_one_request() -> None:
    done = run("--requests", "1")
    assert done.returncode == 0, done.stderr
    assert "request 0: 64 blocks read, checked and copied into the pool" in done.stdout
    assert "request 1:" not in done.stdout
