"""Notes: what a check could not perturb or compare is said, not hidden."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from check_support import check_source

from promptcache.check.output import render_text
from promptcache.check.runner import CommandFailedError, CommandTimeoutError, run_check

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


def _fake_time_machine(tmp_path: Path) -> Path:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "time_machine.py").write_text("raise ImportError('not here')\n")
    return fake


def test_a_run_line_says_the_clock_was_not_moved(tmp_path: Path) -> None:
    program = tmp_path / "post.py"
    program.write_text(POST, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(_fake_time_machine(tmp_path))}
    with (tmp_path / "out.txt").open("w") as out:
        both = run_check([sys.executable, str(program)], env=env, stdout=out)
        alone = run_check([sys.executable, str(program)], env=env, stdout=out, isolate=True)
    line = next(s for s in render_text(both).splitlines() if s.startswith("run 1:"))
    assert "changes the wall clock" not in line
    assert line.startswith("run 1: changes PYTHONHASHSEED=")
    assert "; the wall clock was not moved (time-machine is not installed in this Python); " in line
    assert alone.runs[1].describe() == (
        "run 1: changes nothing: the wall clock was not moved "
        "(time-machine is not installed in this Python)"
    )
    assert alone.runs[2].describe() == alone.runs[2].perturbation.describe()


# run 0 posts and exits; run 1 posts, then dies of a signal or sleeps past the timeout
POST_THEN_FAIL = (
    POST
    + """
import signal, sys, time
if os.getpid() != 40000:  # run 0 reports 40000
    if sys.argv[1:] == ["kill"]:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)
"""
)


@pytest.mark.parametrize(
    ("args", "error", "timeout"),
    [([], CommandTimeoutError, 3.0), (["kill"], CommandFailedError, None)],
)
def test_a_failed_run_is_not_said_to_have_moved_the_clock(
    tmp_path: Path, args: list[str], error: type[Exception], timeout: float | None
) -> None:
    program = tmp_path / "post.py"
    program.write_text(POST_THEN_FAIL, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(_fake_time_machine(tmp_path))}
    with (tmp_path / "out.txt").open("w") as out, pytest.raises(error) as failed:
        run_check([sys.executable, str(program), *args], env=env, stdout=out, timeout=timeout)
    said = str(failed.value)
    assert "in run 1 (changes PYTHONHASHSEED=" in said
    assert "changes the wall clock" not in said
    assert "; the wall clock was not moved (time-machine is not installed in this Python))" in said


PARENT_AND_CHILD = (
    POST
    + """
import subprocess, sys
fake = os.environ["FAKE_TIME_MACHINE"]
env = {**os.environ, "PYTHONPATH": fake + os.pathsep + os.environ["PYTHONPATH"]}
subprocess.run([sys.executable, __file__.replace("parent.py", "post.py")], env=env, check=True)
"""
)


def test_a_run_line_says_which_processes_kept_their_clock(tmp_path: Path) -> None:
    (tmp_path / "post.py").write_text(POST, encoding="utf-8")
    program = tmp_path / "parent.py"
    program.write_text(PARENT_AND_CHILD, encoding="utf-8")
    env = {**os.environ, "FAKE_TIME_MACHINE": str(_fake_time_machine(tmp_path))}
    with (tmp_path / "out.txt").open("w") as out:
        result = run_check([sys.executable, str(program)], env=env, stdout=out, isolate=True)
    assert result.runs[1].describe() == (
        "run 1: changes the wall clock (+1 day 3:17:42, but not in the processes of 1 of 2 "
        "request(s): time-machine is not installed in this Python)"
    )


def test_requests_without_the_hook_are_noted(tmp_path: Path) -> None:
    notes = _run(tmp_path, "-I")  # isolated mode ignores PYTHONPATH: no sitecustomize
    assert notes == [
        f"run {run}: 1 request(s) came without the in-process hook's headers (from a process "
        "without the hook: not Python, or python -I/-S; or through a client other than httpx, "
        "httpx2, requests, aiohttp and urllib): no call site, and in a process without the hook "
        "the clock, random, listing and pid changes did not apply to them"
        for run in (0, 1)
    ]


UNCOMPARED = """
import datetime, os, httpx
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"

def short_prompt():  # a clock in a prompt far below gpt-4o-mini's 1,024-token minimum
    system = "Now: " + datetime.datetime.now().isoformat()
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
    httpx.post(url, json={"model": "gpt-4o-mini", "messages": messages}, timeout=30)

def pid_many():  # one request in run 0 (pid 40000), two in run 1 (pid 47919)
    for _ in range(1 + os.getpid() % 2):
        messages = [{"role": "user", "content": "hi"}]
        httpx.post(url, json={"model": "gpt-4o-mini", "messages": messages}, timeout=30)

short_prompt()
pid_many()
"""


def test_short_prompts_and_unpaired_requests_are_noted(tmp_path: Path) -> None:
    result = check_source(tmp_path, "uncompared.py", UNCOMPARED)
    assert result.findings == []
    assert [sum(1 for q in r.requests if q.api) for r in result.runs] == [2, 3]
    assert result.notes == [
        "run 1: 1 request(s) had no partner at their call site in the other run (the runs sent "
        "different numbers of requests there); they were not compared",
        "run 1: 1 request pair(s) differ only in prompts shorter than the model's minimum "
        "cacheable prefix (nothing is cached there yet); not reported",
    ]


REORDERED = """
import os, httpx
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
documents = ["Document about parcels. " * 300, "Document about refunds. " * 300]
if os.getpid() % 2:  # run 1 (pid 47919) sends them in the other order, as a pool might
    documents.reverse()
for document in documents:
    messages = [{"role": "system", "content": document}, {"role": "user", "content": "sum up"}]
    httpx.post(url, json={"model": "gpt-4o-mini", "messages": messages}, timeout=30)
"""


def test_requests_sent_in_another_order_are_paired_by_content(tmp_path: Path) -> None:
    result = check_source(tmp_path, "reordered.py", REORDERED)
    first = [r.json_body["messages"][0]["content"][:20] for r in result.runs[1].requests]
    assert first == ["Document about refun", "Document about parce"]  # the order did change
    assert result.findings == [] and result.notes == []


REORDERED_DATED = """
import datetime, os, httpx
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
topics = ["parcels", "refunds", "returns"]
if os.getpid() % 2:  # run 1 (pid 47919) sends them in another order, as a pool might
    topics.reverse()
for topic in topics:
    system = f"Today is {datetime.datetime.now():%Y-%m-%d %H:%M}. Document {topic}. " + "x " * 1500
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "sum up"}]
    httpx.post(url, json={"model": "gpt-4o-mini", "messages": messages}, timeout=30)
"""


def test_requests_in_another_order_that_all_differ_are_paired_with_the_closest(
    tmp_path: Path,
) -> None:
    # every request's prefix differs (the date), so none has an identical partner: each is
    # compared with the one of the other run that differs least, not with the one sent at
    # the same position, whose other document would read as a random difference
    result = check_source(tmp_path, "reordered_dated.py", REORDERED_DATED)
    topics = [r.json_body["messages"][0]["content"].split()[5] for r in result.runs[1].requests]
    assert topics == ["returns.", "refunds.", "parcels."]  # the order did change
    assert [(f.rule, f.causes, f.requests) for f in result.findings] == [("PC001", ("clock",), 3)]
    for finding in result.findings:
        assert finding.before is not None and finding.after is not None
        assert finding.before.split("Document")[1] == finding.after.split("Document")[1]


SEQUENTIAL_IDS = """
import os, uuid, httpx
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
for turn in range(8):
    system = f"Request id: {uuid.uuid4()}. " + "Answer briefly. " * 400
    messages = [{"role": "system", "content": system}, {"role": "user", "content": f"q{turn}"}]
    httpx.post(url, json={"model": "gpt-4o-mini", "messages": messages}, timeout=30)
"""


def test_requests_that_all_differ_alike_stay_paired_in_order(tmp_path: Path) -> None:
    # every pair differs by one uuid; uuids share a few characters by chance, which must not
    # pair request 0 of run 0 with another request of run 1 than its own
    result = check_source(tmp_path, "sequential_ids.py", SEQUENTIAL_IDS)
    ids = [
        [q.json_body["messages"][0]["content"].split()[2].rstrip(".") for q in run.requests]
        for run in result.runs
    ]
    assert [(f.rule, f.causes, f.requests) for f in result.findings] == [("PC002", ("random",), 8)]
    (finding,) = result.findings
    assert finding.before is not None and finding.after is not None
    assert ids[0][0] in finding.before and ids[1][0] in finding.after


AIOHTTP = """
import asyncio, os, uuid, aiohttp

async def ask():
    system = f"Request {uuid.uuid4()}. " + "Answer briefly. " * 400
    body = {"model": "gpt-4o-mini", "messages": [
        {"role": "system", "content": system}, {"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as session:
        async with session.post("https://api.openai.com/v1/chat/completions", json=body) as r:
            assert r.status == 200, r.status
    async with aiohttp.ClientSession(base_url=os.environ["OPENAI_BASE_URL"] + "/") as session:
        async with session.post("chat/completions", json=body) as r:
            assert r.status == 200, r.status

asyncio.run(ask())
"""


def test_aiohttp_requests_carry_their_call_site(tmp_path: Path) -> None:
    # aiohttp is tagged like httpx and requests: a call site for each request, a post straight
    # to the vendor's host rerouted to the endpoint, and no note of requests without the hook
    pytest.importorskip("aiohttp")
    result = check_source(tmp_path, "aiohttp_app.py", AIOHTTP)
    assert result.notes == []
    for run in result.runs:
        assert [q.site.function if q.site else None for q in run.requests] == ["ask", "ask"]
        assert [q.headers.get("x-promptcache-check-upstream") for q in run.requests] == [
            "https://api.openai.com/v1/chat/completions",
            None,
        ]
    # one finding per call site (the two posts), each at its line of the program
    lines = [i for i, text in enumerate(AIOHTTP.splitlines(), 1) if "session.post(" in text]
    assert [
        (f.rule, f.causes, f.site.path if f.site else None, f.site.line if f.site else None)
        for f in result.findings
    ] == [("PC002", ("random",), str(tmp_path / "aiohttp_app.py"), line) for line in lines]


REORDERED_FAR = """
import datetime, os, httpx
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
numbers = list(range(40))
if os.getpid() % 2:  # run 1 sends them in reverse: a partner is up to 39 requests away
    numbers.reverse()
for number in numbers:
    system = f"Now {datetime.datetime.now()}. Document {number}. " + "x " * 1500
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "sum up"}]
    httpx.post(url, json={"model": "gpt-4o-mini", "messages": messages}, timeout=30)
"""


def test_requests_far_from_their_partners_are_paired_by_what_the_time_leaves(
    tmp_path: Path,
) -> None:
    # 64 pool workers reorder requests further than the closest-partner window: with the time
    # masked each request still has one partner, its own document
    result = check_source(tmp_path, "reordered_far.py", REORDERED_FAR)
    assert [(f.rule, f.causes, f.requests) for f in result.findings] == [("PC001", ("clock",), 40)]


GROWING = """
import datetime, os, httpx
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
system = {"role": "system", "content": "Now: " + datetime.datetime.now().isoformat()}
history = [{"role": "user", "content": "hi"}]
def ask():  # the conversation's first request is far below gpt-4o-mini's 1,024-token minimum
    httpx.post(url, json={"model": "gpt-4o-mini", "messages": [system, *history]}, timeout=30)
ask()
history += [{"role": "assistant", "content": "hello"},
            {"role": "user", "content": "here is my file: " + "word " * 1500}]
ask()  # now the prompt is cached, the clock in its system message with it
"""


def test_a_short_first_request_does_not_hide_the_break_of_a_longer_one(tmp_path: Path) -> None:
    """The first request's clock difference, below the minimum, was excused and remembered, so
    the same difference in the second request, 1,500 tokens long and cached, was excused too:
    0 findings, and a note counting 1 short pair. The long request is judged on its own."""
    result = check_source(tmp_path, "growing.py", GROWING)
    assert [(f.rule, f.path) for f in result.findings] == [("PC001", "messages[0].content")]
    assert result.notes == [
        "run 1: 1 request pair(s) differ only in prompts shorter than the model's minimum "
        "cacheable prefix (nothing is cached there yet); not reported",
    ]


UNMARKED_FIRST = """
import os, httpx
url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
system = [{"type": "text", "text": f"You help. Worker {os.getpid()}."}]
def ask(messages):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "system": system, "messages": messages}
    httpx.post(url, json=body, headers={"x-api-key": "k", "anthropic-version": "2023-06-01"})
ask([{"role": "user", "content": "hi"}])  # no breakpoint: caches nothing
ask([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
     {"role": "user", "content": [{"type": "text", "text": "file: " + "word " * 3000,
                                   "cache_control": {"type": "ephemeral"}}]},
     {"role": "assistant", "content": "ok"}, {"role": "user", "content": "sum it up"}])
"""


def test_a_request_without_breakpoint_does_not_hide_a_later_cached_break(tmp_path: Path) -> None:
    """The pid in the system prompt of a first request without breakpoints was excused and
    remembered, and the second request, which caches 3,000 tokens after it, was excused too."""
    result = check_source(tmp_path, "unmarked.py", UNMARKED_FIRST)
    assert [(f.rule, f.path, f.requests) for f in result.findings] == [
        ("PC002", "system[0].text", 1)
    ]
    assert result.notes == [
        "run 1: 1 request pair(s) differ in Anthropic/Bedrock requests that carry no cache "
        "breakpoint (those APIs cache nothing unasked); not reported",
    ]
