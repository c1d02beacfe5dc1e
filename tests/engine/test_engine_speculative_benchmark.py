"""benchmarks/engine_speculative.py as a user runs it: bad numbers, a model that cannot be
loaded and a speculative_config the engine refuses are usage errors (exit 2, the error on one
line, no traceback); a small ``--verify-cost`` run on the tiny checkpoint prints a row per draft
length whose figures agree with each other."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "engine_speculative.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )


def assert_usage_error(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("engine_speculative.py: error: ") and message in last, done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "0"], "argument --threads: 0 is below 1: pass 1 or more"),
        (["--repeats", "-2"], "argument --repeats: -2 is below 1: pass 1 or more"),
        (["--new", "1"], "argument --new: 1 is below 2: pass 2 or more"),
        (["--num-speculative-tokens", "x"], "'x' is not a whole number"),
        (["--prompt-lookup-min", "0"], "argument --prompt-lookup-min: 0 is below 1"),
        (["--verify-steps", "0", "--verify-cost", "0,1"], "argument --verify-steps: 0 is below 1"),
        (["--verify-cost", ""], "--verify-cost takes draft lengths such as 0,1,3,5, got ''"),
        (["--verify-cost", "0,-1"], "distinct lengths >= 0"),
        (["--verify-cost", "0,10000000000000000000000"], "lengths must be <= 32"),
    ],
)
def test_bad_numbers_are_usage_errors(args: list[str], message: str) -> None:
    assert_usage_error(run(*args), message)


def test_a_model_that_cannot_be_loaded_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    done = run("--model", str(missing), "--verify-cost", "0,1")
    assert_usage_error(done, f"GGUF file '{missing}' does not exist")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--num-speculative-tokens", "65"], "num_speculative_tokens must be between 1 and 64"),
        (["--prompt-lookup-min", "5", "--prompt-lookup-max", "2"], "prompt_lookup_min=5 must be"),
    ],
)
def test_a_speculative_config_the_engine_refuses_is_a_usage_error(
    tinystories_dir: Path, args: list[str], message: str
) -> None:
    done = run("--model", str(tinystories_dir), "--no-anchor", "--threads", "1", *args)
    assert_usage_error(done, message)


def test_a_small_verify_cost_run(tinystories_dir: Path) -> None:
    done = run("--model", str(tinystories_dir), "--verify-cost", "0,1,3", "--verify-steps", "3",
               "--threads", "1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in done.stdout.splitlines()
        if re.match(r"\| \d", line)
    ]
    assert [int(r[0]) for r in rows] == [0, 1, 3]
    plain_ms = float(rows[0][3])
    for drafts, verified_rows, steps, median_ms, ratio in rows:
        assert int(verified_rows) == int(drafts) + 1
        assert int(steps) >= 3
        # the ratio is of the unrounded medians; the printed ms are rounded to 0.1
        low = (float(median_ms) - 0.05) / (plain_ms + 0.05)
        high = (float(median_ms) + 0.05) / max(plain_ms - 0.05, 1e-9)
        assert low - 0.005 <= float(ratio) <= high + 0.005
    assert rows[0][4] == "1.00"
