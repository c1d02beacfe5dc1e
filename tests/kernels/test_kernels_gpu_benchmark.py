"""benchmarks/kernels_gpu.py's CPU modes as a user runs them (the Triton interpreter, tiny
shapes): the launch sweep checks every configuration it times, and the engine section compares
the triton backend's greedy tokens with the torch backend's on the real tinystories model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels_gpu.py"
TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--check-only", *args],
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_the_sweep_checks_every_launch_it_times(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    done = _run("--sweep", "all", "--json", str(out))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    shapes = {(r["kernel"], r["config"]) for r in rows}
    assert {k for k, _ in shapes} == {"decode", "extend"}
    # every launch on every shape: checked against the reference, then timed
    assert all(r["ok"] and r["max_rel_err"] <= 2e-2 and r["ms"] > 0 for r in rows)
    # each shape of a kernel ran the same launches
    for kernel in ("decode", "extend"):
        per_shape = {}
        for r in rows:
            if r["kernel"] == kernel:
                per_shape.setdefault(r["config"], set()).add(
                    json.dumps(r["launch"], sort_keys=True)
                )
        assert len({frozenset(v) for v in per_shape.values()}) == 1
    assert f"{len(rows)} runs, 0 failed or errored" in done.stdout
    # the table's first row per shape is the default launch
    assert done.stdout.count("| default: ") == len(shapes)


def test_the_engine_section_compares_greedy_tokens() -> None:
    done = _run("--engine-model", str(TINYSTORIES))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("| engine |"))
    equal, total = (int(n) for n in re.findall(r"greedy tokens equal: (\d+) of (\d+)", line)[0])
    assert (equal, total) == (64, 64)  # 4 prompts x 16 tokens, every one equal
    assert "| ok |" in line


def test_a_missing_model_directory_is_a_usage_error(tmp_path: Path) -> None:
    done = _run("--engine-model", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert "is not a directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_sweep_counts_in_the_docs_are_those_of_its_stored_rows() -> None:
    repo = SCRIPT.parents[1]
    rows = json.loads(
        (repo / "benchmarks" / "results" / "kernels_gpu_h200_sweep_24d051b.json").read_text()
    )["rows"]
    text = " ".join((repo / "docs" / "benchmarks.md").read_text().split())
    section = text[text.index("### Launch sweep and the chosen defaults") :]
    for kernel in ("decode", "extend"):
        launches = {json.dumps(r["launch"], sort_keys=True) for r in rows if r["kernel"] == kernel}
        assert f" {len(launches)} {kernel} launches (" in section
    launched = [r for r in rows if r["ms"] is not None]
    assert all(r["ok"] for r in launched)
    assert f"all {len(launched)} that launched passed; the {len(rows) - len(launched)} " in section
