"""A worker process of `promptcache lint` killed by the system (the out-of-memory killer, a
signal) ends the run with one clear error line and exit status 2, never a traceback; a run
whose workers are left alone reports as usual."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="finds the worker processes through /proc"
)

#: one module of the generated program: a helper in another module, a sink fed through it,
#: so that every file is analysed (and again in the fixpoint's later rounds)
MODULE = """\
import datetime
from openai import OpenAI
from pkg.helpers_{prev} import render_{prev}

client = OpenAI()


def render_{i}(name, extra):
    return "\\n".join([render_{prev}(name, extra), f"part {i}: {{name}}", str(extra)])


def ask_{i}(history, question):
    system = render_{i}("bot", datetime.date.today())
    messages = [{{"role": "system", "content": system}}, *history]
    messages.append({{"role": "user", "content": question}})
    return client.chat.completions.create(model="gpt-4o", messages=messages)
"""


def _tree(root: Path, files: int) -> Path:
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers_0.py").write_text("def render_0(name, extra):\n    return name\n")
    for i in range(1, files):
        (pkg / f"helpers_{i}.py").write_text(MODULE.format(i=i, prev=i - 1))
    return root


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _lint(cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, "-m", "promptcache", "lint", ".", "--no-cache", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_killed_worker_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    tree = _tree(tmp_path, 400)
    run = _lint(tree, "--jobs", "2")
    killed: set[int] = set()
    deadline = time.monotonic() + 120
    while run.poll() is None and time.monotonic() < deadline and not killed:
        for child in _children(run.pid):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"resource_tracker" in cmdline:
                continue
            os.kill(child, signal.SIGKILL)
            killed.add(child)
            break
        time.sleep(0.005)
    out, err = run.communicate(timeout=120)
    assert killed, f"no worker process appeared (exit {run.returncode}): {err}"
    assert run.returncode == 2, (run.returncode, out, err)
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith("error: a worker process of the analysis was killed"), err
    assert "--jobs 1" in lines[-1]


def test_the_same_tree_left_alone_reports_as_usual(tmp_path: Path) -> None:
    tree = _tree(tmp_path, 60)
    run = _lint(tree, "--jobs", "2", "--select", "ALL")
    out, err = run.communicate(timeout=300)
    assert "Traceback" not in err
    # a day-precision date in each system prompt: one PC001 info per module that sends
    assert run.returncode == 0, (out, err)
    assert out.count("PC001") == 59, out
