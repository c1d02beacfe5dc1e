"""benchmarks/engine_tiers.py as a user runs it: numbers below 1 and a model that cannot be
loaded (missing, or too short a context for the benchmark's 1,280 tokens) are usage errors
(exit 2, the error on one line, no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "engine_tiers.py"


def assert_usage_error(args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("engine_tiers.py: error: ") and message in last, done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "0"], "argument --threads: 0 is below 1: pass 1 or more"),
        (["--repeats", "0"], "argument --repeats: 0 is below 1: pass 1 or more"),
        (["--repeats", "-2"], "argument --repeats: -2 is below 1: pass 1 or more"),
        (["--repeats", "x"], "argument --repeats: 'x' is not a whole number"),
    ],
)
def test_bad_numbers_are_usage_errors(args: list[str], message: str) -> None:
    assert_usage_error(args, message)


def test_a_missing_model_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    assert_usage_error(["--model", str(missing)], f"GGUF file '{missing}' does not exist")


def test_a_model_of_too_short_a_context_is_a_usage_error(tinystories_dir: Path) -> None:
    assert_usage_error(
        ["--model", str(tinystories_dir), "--weight-dtype", "auto", "--threads", "1"],
        "max_model_len=1280 exceeds the 512 positions",
    )
