"""benchmarks/engine_speculative.py as a user runs it: bad numbers, a model that cannot be
loaded and a speculative_config the engine refuses are usage errors (exit 2, the error on one
line, no traceback); on the tiny checkpoint, a run of the natural-chat prompts whose verdict is
the median of the printed per-repeat paired ratios (5 repeats by default), a small
``--verify-cost`` run that prints a row per draft length, and a small ``--step-overhead`` run,
each with figures that agree with each other."""

from __future__ import annotations

import re
import statistics
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
        (["--verify-cost", "0,1", "--step-overhead"], "two different runs: pass one"),
        (["--only", "chat"], "argument --only: invalid choice: 'chat'"),
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


def test_only_echo_heavy_runs_the_echo_heavy_prompts(tinystories_dir: Path) -> None:
    # the tiny checkpoint's 512-token context holds no echo-heavy prompt: the run reaches
    # the first one and says so (with no prompt selected, it failed printing an empty table)
    done = run("--model", str(tinystories_dir), "--no-anchor", "--only", "echo-heavy",
               "--repeats", "1", "--new", "2", "--threads", "1")  # fmt: skip
    assert_usage_error(done, "tokens but max_model_len is 512")


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


def table_rows(stdout: str, first_cell: str) -> list[list[str]]:
    """The cells of the printed Markdown table's rows whose first cell matches ``first_cell``."""
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in stdout.splitlines()
        if re.match(r"\| " + first_cell, line)
    ]


def test_the_verdict_is_the_median_of_the_paired_ratios(tinystories_dir: Path) -> None:
    done = run("--model", str(tinystories_dir), "--no-anchor", "--only", "natural-chat",
               "--new", "16", "--threads", "1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "medians of 5 repeats" in done.stdout  # the default
    rows = table_rows(done.stdout, "natural chat")
    assert len(rows) == 3
    for row in rows:
        _, _, _, plain, spec, speed_up, per_repeat, of_medians, _, target = row
        ratios = [float(r) for r in per_repeat.split(" / ")]
        assert len(ratios) == 5
        # the median of 5 rounded ratios is the rounded median (rounding keeps their order)
        paired = statistics.median(ratios)
        assert speed_up == f"{paired:.2f}x"
        # the ratio of the medians is printed beside it, from the printed medians (rounded)
        assert abs(float(of_medians.removesuffix("x")) - float(spec) / float(plain)) < 0.011
        assert target.startswith("ours >= 0.97x: ")
        if abs(paired - 0.97) > 0.005:  # the printed median is rounded to 0.01
            assert target.endswith(": met" if paired >= 0.97 else ": MISSED"), row
    met = sum(row[-1].endswith(": met") for row in rows)
    assert f"targets met, our halves only: {met} of 3" in done.stdout


def test_a_small_step_overhead_run(tinystories_dir: Path) -> None:
    done = run("--model", str(tinystories_dir), "--step-overhead", "--repeats", "2",
               "--new", "12", "--threads", "1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {row[0]: row for row in table_rows(done.stdout, "(plain|spec)")}
    assert list(rows) == ["plain A", "spec", "plain B"]
    # 2 requests of 12 tokens: 11 decode steps each for the plain engines
    assert int(rows["plain A"][1]) == int(rows["plain B"][1]) == 22
    drafted = int(re.search(r"left out \((\d+) of them\)", done.stdout).group(1))  # type: ignore[union-attr]
    assert int(rows["spec"][1]) + drafted <= 22
    ms = {name: float(row[2]) for name, row in rows.items()}
    assert rows["plain A"][3] == "1.000" and rows["plain B"][4] == "1.000"
    for name, row in rows.items():
        for column, base in ((3, "plain A"), (4, "plain B")):
            # the ratios are of the unrounded medians; the printed ms are rounded to 0.01
            low = (ms[name] - 0.005) / (ms[base] + 0.005)
            high = (ms[name] + 0.005) / max(ms[base] - 0.005, 1e-9)
            assert low - 0.0005 <= float(row[column]) <= high + 0.0005
    assert re.search(r"proposer .*: [\d.]+ us per decode step", done.stdout)
