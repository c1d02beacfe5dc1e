"""Notes: what a check could not perturb or compare is said, not hidden."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from promptcache.check.runner import run_check

POST = """
import os, httpx
body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
assert httpx.post(url, json=body, timeout=30).status_code == 200
"""


def _run(tmp_path: Path, *python_flags: str, pythonpath: str | None = None) -> list[str]:
    program = tmp_path / "post.py"
    program.write_text(POST, encoding="utf-8")
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    with (tmp_path / "out.txt").open("w") as out:
        result = run_check([sys.executable, *python_flags, str(program)], env=env, stdout=out)
    assert [sum(1 for q in r.requests if q.api) for r in result.runs] == [1, 1]
    return result.notes


def test_a_child_without_time_machine_is_noted(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "time_machine.py").write_text("raise ImportError('not here')\n")
    notes = _run(tmp_path, pythonpath=str(fake))
    assert notes == [
        f"run {run}: 1 request(s) came from processes whose clock the hook could not move "
        "(time-machine is not installed in this Python): a time value in them was not perturbed"
        for run in (0, 1)
    ]


def test_requests_without_the_hook_are_noted(tmp_path: Path) -> None:
    notes = _run(tmp_path, "-I")  # isolated mode ignores PYTHONPATH: no sitecustomize
    assert notes == [
        f"run {run}: 1 request(s) came without the in-process hook (not a Python process, or "
        "python -I/-S): no call site, and the clock, random, listing and pid changes did not "
        "apply to them"
        for run in (0, 1)
    ]
