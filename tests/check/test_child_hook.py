"""The in-process hook in real child processes: what each perturbation changes, that run 0 and an
isolated run keep the other kinds equal, and that an existing sitecustomize still runs."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from promptcache.check.perturbation import CLOCK_SHIFT, plan_runs

PROBE = """
import datetime, json, os, random, secrets, time, uuid
folder = os.environ["PROBE_DIR"]
print(json.dumps({
    "time": time.time(),
    "today": datetime.date.today().isoformat(),
    "random": random.random(),
    "uuid": str(uuid.uuid4()),
    "token": secrets.token_hex(4),
    "listdir": os.listdir(folder),
    "scandir": [e.name for e in os.scandir(folder)],
    "pid": os.getpid(),
    "set": list({"alpha_tool", "beta_tool", "gamma_tool", "delta_tool"}),
    "chained": os.environ.get("CHAINED_SITECUSTOMIZE_RAN"),
}))
"""


def _probe(tmp_path: Path, run: int, isolate: bool, extra_path: str = "") -> dict[str, object]:
    folder = tmp_path / "files"
    folder.mkdir(exist_ok=True)
    for name in ("a.md", "b.md", "c.md", "d.md"):
        (folder / name).write_text(name)
    plan = plan_runs(2, isolate=isolate, start=1_800_000_000.0)[run]
    base = {**os.environ, "PROBE_DIR": str(folder)}
    if extra_path:
        base["PYTHONPATH"] = extra_path
    env = plan.env(base, "http://127.0.0.1:9", [])
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_each_kind_changes_and_run_0_keeps_the_file_system_order(tmp_path: Path) -> None:
    base, changed = _probe(tmp_path, 0, False), _probe(tmp_path, 1, False)
    natural = os.listdir(tmp_path / "files")
    assert base["listdir"] == natural
    assert base["scandir"] == [e.name for e in os.scandir(tmp_path / "files")]
    assert sorted(changed["listdir"]) == sorted(natural) and changed["listdir"] != natural  # type: ignore[arg-type]
    assert changed["scandir"] != base["scandir"]
    shift = changed["time"] - base["time"]  # type: ignore[operator]
    assert abs(shift - CLOCK_SHIFT.total_seconds()) < 30
    assert abs(base["time"] - 1_800_000_000.0) < 30  # type: ignore[operator]
    for key in ("random", "uuid", "token", "pid"):
        assert base[key] != changed[key], key
    # what the run descriptions print: "os.getpid() = 40000" in run 0, "= 47919" in run 1
    assert (base["pid"], changed["pid"]) == (40_000, 47_919)
    assert plan_runs(2, isolate=False, start=0.0)[1].describe().endswith("(os.getpid() = 47919)")


def test_random_is_seeded_as_the_docs_say(tmp_path: Path) -> None:
    # docs/check.md said "seeded with 0", but random.seed(0) draws 0.8444...: run k seeds
    # `random` with the string "k-0" (a forked child reseeds with its own pid)
    base, changed = _probe(tmp_path, 0, False), _probe(tmp_path, 1, False)
    assert base["random"] == random.Random("0-0").random()
    assert changed["random"] == random.Random("1-0").random()
    docs = (Path(__file__).parents[2] / "docs" / "check.md").read_text(encoding="utf-8")
    assert 'seeded from the run\'s number: `random.seed("0-0")`' in docs
    assert '| `random.seed("k-0")` |' in docs


def test_an_isolated_run_changes_only_its_kind(tmp_path: Path) -> None:
    base = _probe(tmp_path, 0, True)
    clock_only = _probe(tmp_path, 1, True)  # --isolate: run 1 changes the clock only
    assert clock_only["time"] - base["time"] > 86_000  # type: ignore[operator]
    for key in ("random", "uuid", "token", "listdir", "scandir", "pid", "set"):
        assert base[key] == clock_only[key], key
    again = _probe(tmp_path, 0, True)
    assert (again["uuid"], again["random"]) == (base["uuid"], base["random"])  # deterministic


def test_an_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(
        "import os\nos.environ['CHAINED_SITECUSTOMIZE_RAN'] = 'yes'\n"
    )
    assert _probe(tmp_path, 0, False, str(theirs))["chained"] == "yes"


PID_PROBE = """
import json, os
pid = os.getpid()
os.kill(pid, 0)  # its own changed number reaches the process itself
print(json.dumps({
    "pid": pid,
    "proc": os.path.exists(f"/proc/{pid}/status"),
    "self": os.readlink("/proc/self") if os.path.exists("/proc/self") else None,
    "ppid": os.getppid(),
}))
"""


def test_the_changed_pid_is_no_address_of_the_process_as_the_docs_say(tmp_path: Path) -> None:
    # docs/check.md, what it cannot see: code that addresses its own process by os.getpid()
    # (/proc/<pid>, psutil.Process(os.getpid())) does not find it, in run 0 too; os.kill of it
    # and os.getppid() are the real ones
    if not os.path.exists("/proc/self/status"):
        return  # no /proc to address
    plan = plan_runs(2, isolate=False, start=1_800_000_000.0)[0]
    env = plan.env(dict(os.environ), "http://127.0.0.1:9", [])
    out = subprocess.run(
        [sys.executable, "-c", PID_PROBE], env=env, capture_output=True, text=True, check=True
    )
    seen = json.loads(out.stdout)
    assert seen["pid"] == 40_000 and seen["ppid"] == os.getpid()
    assert str(seen["self"]) != "40000"  # the real process, under another number
    # the look-alike, without check: the number is the process's own
    plain = subprocess.run(
        [sys.executable, "-c", PID_PROBE], capture_output=True, text=True, check=True
    )
    assert json.loads(plain.stdout)["proc"] is True
    if str(seen["self"]) != "40000" and not os.path.exists("/proc/40000"):
        assert seen["proc"] is False


CLOCK_TEXT_PROBE = """
import json, time
print(json.dumps({
    "time": time.time(),
    "ctime": time.mktime(time.strptime(time.ctime())),
    "asctime": time.mktime(time.strptime(time.asctime())),
    "ctime_none": time.mktime(time.strptime(time.ctime(None))),
    "ctime_0": time.ctime(0),
    "asctime_epoch": time.asctime(time.gmtime(0)),
}))
"""


def test_ctime_and_asctime_without_an_argument_read_the_travelled_clock(tmp_path: Path) -> None:
    # time.ctime() and time.asctime() read the C clock, which time-machine does not move: a
    # prompt with `time.ctime()` kept the real time in every run, so a date from it
    # (`time.ctime()[:10]`) was the same in both runs and check missed it
    for run in (0, 1):
        plan = plan_runs(2, isolate=False, start=1_800_000_000.0)[run]
        env = plan.env(dict(os.environ), "http://127.0.0.1:9", [])
        out = subprocess.run(
            [sys.executable, "-c", CLOCK_TEXT_PROBE],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        seen = json.loads(out.stdout)
        for key in ("ctime", "asctime", "ctime_none"):
            assert abs(seen[key] - seen["time"]) < 30, (run, key, seen)
        # an explicit instant is not the clock: it stays what it names
        assert seen["ctime_0"] == __import__("time").ctime(0)
        assert seen["asctime_epoch"] == "Thu Jan  1 00:00:00 1970"
