"""`promptcache check` on awkward commands and input: a hanging command (--timeout), piped
standard input, a command killed by a signal, an --output it cannot write, request bodies it
cannot read, routes it does not serve; and the excerpt of a reordering. Real subprocesses and
the real capture endpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from check_support import CLI, REPO

from promptcache.check.output import render
from promptcache.check.runner import CommandFailedError, CommandTimeoutError, run_check


def _cli(*args: str, stdin: str = "", cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _program(tmp: Path, source: str) -> str:
    path = tmp / "prog.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return str(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_timeout_stops_a_hanging_command_and_its_subprocess(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    prog = _program(
        tmp_path,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(120)
        """,
    )
    with pytest.raises(CommandTimeoutError, match=r"ran past --timeout 2 s in run 0 \(baseline\)"):
        run_check([sys.executable, prog], timeout=2, stdin=b"", stdout=sys.stderr)
    grandchild = int(pid_file.read_text())
    # the whole process group was stopped (SIGTERM), so the grandchild is gone or a zombie
    # waiting for its reaper
    if _alive(grandchild):
        state = Path(f"/proc/{grandchild}/stat").read_text().split(") ")[1][0]
        assert state == "Z"


def test_timeout_on_the_command_line_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    prog = _program(tmp_path, "import time\nprint('started', flush=True)\ntime.sleep(120)\n")
    done = _cli("check", "--timeout", "1.5", "--", sys.executable, prog)
    assert done.returncode == 2
    assert done.stdout == "started\n"  # run 0 was stopped: no second run, no report
    assert done.stderr.strip().splitlines() == [
        "error: the command ran past --timeout 1.5 s in run 0 (baseline) and was stopped; any "
        "output it printed is above"
    ]


def test_timeout_must_be_positive() -> None:
    done = _cli("check", "--timeout", "0", "--", sys.executable, "-c", "pass")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_a_command_that_ends_in_time_is_checked_as_usual(tmp_path: Path) -> None:
    result = run_check([sys.executable, "-c", "pass"], timeout=60, stdout=sys.stderr)
    assert [r.exit_status for r in result.runs] == [0, 0]


def test_piped_stdin_reaches_every_run(tmp_path: Path) -> None:
    prog = _program(tmp_path, "import sys\nprint('got', repr(sys.stdin.read()))\n")
    done = _cli("check", "--runs", "3", "--", sys.executable, prog, stdin="line one\nline two\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("got 'line one\\nline two\\n'") == 3


def test_piped_stdin_in_the_prompt_is_no_finding(tmp_path: Path) -> None:
    prog = _program(
        tmp_path,
        """
        import sys, httpx
        system = "You are a careful agent. " * 400 + sys.stdin.read()
        httpx.post("https://api.openai.com/v1/chat/completions", json={"model": "gpt-4o",
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": "hi"}]})
        """,
    )
    done = _cli("check", "--", sys.executable, prog, stdin="the user's document\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("promptcache check: 0 findings in 2 runs\n")


def test_a_command_killed_by_a_signal_is_named(tmp_path: Path) -> None:
    prog = _program(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    with pytest.raises(CommandFailedError, match=r"killed by SIGTERM in run 0 \(baseline\)"):
        run_check([sys.executable, prog], stdout=sys.stderr)


def test_output_in_a_missing_folder_is_one_error_line_before_any_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    prog = _program(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n")
    target = tmp_path / "no-such-folder" / "check.json"
    done = _cli("check", "--output", str(target), "--", sys.executable, prog)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: cannot write --output {target}: folder {target.parent} does not exist"
    ]
    assert not marker.exists()


_POST = """
import httpx, sys
kind = sys.argv[1]
if kind == "not-json":
    httpx.post("https://api.openai.com/v1/chat/completions", content=b"not json",
               headers={"content-type": "application/json"})
elif kind == "count":
    httpx.post("https://api.anthropic.com/v1/messages/count_tokens", json={"model": "m",
               "messages": [{"role": "user", "content": "hi"}]})
elif kind == "embed":
    for text in ("the first document", "the second document"):
        got = httpx.post("https://api.openai.com/v1/embeddings",
                         json={"model": "text-embedding-3-small", "input": text})
        got.raise_for_status()
else:
    httpx.post("https://api.openai.com/v1/frobnicate", json={"a": 1})
"""


def test_an_unreadable_body_is_not_said_to_be_no_request(tmp_path: Path) -> None:
    result = run_check([sys.executable, _program(tmp_path, _POST), "not-json"], stdout=sys.stderr)
    text = render(result, "text")
    assert "run 0: baseline; 1 LLM request(s) captured" in text
    assert "note: none of run 0's 1 LLM request(s) could be read, so nothing was compared" in text
    assert "no LLM request was captured" not in text


def test_a_request_to_an_unknown_route_is_counted_in_the_note(tmp_path: Path) -> None:
    result = run_check([sys.executable, _program(tmp_path, _POST), "route"], stdout=sys.stderr)
    assert [len(r.requests) for r in result.runs] == [1, 1]
    assert any("sent 1 request(s) to routes of the capture endpoint" in n for n in result.notes)
    assert any(n.endswith(", 1 of them answered 404") for n in result.notes)
    assert not any("sent none" in n for n in result.notes)


def test_a_request_to_a_route_without_a_prompt_is_not_said_to_be_answered_404(
    tmp_path: Path,
) -> None:
    # count_tokens is served (a count, no prompt to compare): the note counts it, and does not
    # call it a 404
    result = run_check([sys.executable, _program(tmp_path, _POST), "count"], stdout=sys.stderr)
    [note] = [n for n in result.notes if "nothing was compared" in n]
    assert "sent 1 request(s) to routes of the capture endpoint that carry no prompt" in note
    assert "404" not in note


def test_embeddings_are_served_and_counted_as_requests_without_a_prompt(tmp_path: Path) -> None:
    # a script that only embeds runs to its end in both runs (each embedding answered, none a
    # 404), and the note counts its requests as ones check does not compare
    result = run_check([sys.executable, _program(tmp_path, _POST), "embed"], stdout=sys.stderr)
    assert [len(r.requests) for r in result.runs] == [2, 2]
    assert [r.exit_status for r in result.runs] == [0, 0] and not any(r.passed for r in result.runs)
    assert {c.status for r in result.runs for c in r.requests} == {200}
    [note] = [n for n in result.notes if "nothing was compared" in n]
    assert "sent 2 request(s) to routes of the capture endpoint that carry no prompt" in note
    assert "(such as embeddings, count_tokens or GET /v1/models)" in note
    assert "404" not in note and not result.findings


def test_a_reordering_shows_where_the_orders_differ(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    for name in ("alpha", "beta", "gamma", "delta", "epsilon"):
        (skills / f"{name}.md").write_text(f"Skill {name}: do {name} things.\n")
    prog = _program(
        tmp_path,
        f"""
        import os, httpx
        folder = {str(skills)!r}
        text = "".join(open(os.path.join(folder, n)).read() for n in os.listdir(folder))
        httpx.post("https://api.openai.com/v1/chat/completions", json={{"model": "gpt-4o",
            "messages": [{{"role": "system", "content": "You are careful. " * 400 + text}},
                         {{"role": "user", "content": "hi"}}]}})
        """,
    )
    result = run_check([sys.executable, prog], stdout=sys.stderr)
    (finding,) = result.findings
    assert finding.rule == "PC004"
    assert finding.before != finding.after
    assert "Skill " in (finding.before or "") and "Skill " in (finding.after or "")


def test_a_reordering_of_long_documents_shows_a_short_excerpt(tmp_path: Path) -> None:
    # documents of 300 characters from a listing, repeated: where the orders first differ the
    # differing stretch runs to the end of the text, and the excerpt printed 36,688 characters
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a", "b", "c", "d", "e", "f"):
        (docs / f"{name}.md").write_text(f"Doc {name}. " + "lorem ipsum " * 25 + "\n")
    prog = _program(
        tmp_path,
        f"""
        import os, httpx
        folder = {str(docs)!r}
        text = "".join(open(os.path.join(folder, n)).read() for n in os.listdir(folder))
        httpx.post("https://api.openai.com/v1/chat/completions", json={{"model": "gpt-4o",
            "messages": [{{"role": "system", "content": text * 20}},
                         {{"role": "user", "content": "hi"}}]}})
        """,
    )
    result = run_check([sys.executable, prog], stdout=sys.stderr)
    (finding,) = result.findings
    assert finding.rule == "PC004"
    for excerpt in (finding.before or "", finding.after or ""):
        assert excerpt.startswith("Doc "), excerpt
        assert len(excerpt) <= 30 + 80 + 1, (len(excerpt), excerpt)
    assert any(e.endswith("\u2026") for e in (finding.before or "", finding.after or ""))


def _start_check_on_sleeper(tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    pid_file = tmp / "sleeper.pid"
    # the real pid (the hook makes os.getpid() report another number)
    prog = _program(
        tmp,
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(os.readlink('/proc/self'))\n"
        "time.sleep(120)\n",
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "check", "--", sys.executable, prog],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # Ctrl-C's default action, as a terminal gives it: a test run started in the background
        # by a non-interactive shell passes SIGINT on ignored, and check would never see it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    for _ in range(600):  # until the sleeper has started
        if pid_file.exists() and pid_file.read_text():
            break
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.05)"], check=True)
    return proc, pid_file


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.split(") ")[1][0] != "Z"


@pytest.mark.parametrize(
    ("sig", "status", "line"),
    [
        (2, 130, "interrupted"),  # Ctrl-C
        (15, 2, "error: promptcache check got SIGTERM; the command was stopped"),
    ],
)
def test_stopping_check_stops_the_command_without_a_traceback(
    tmp_path: Path, sig: int, status: int, line: str
) -> None:
    proc, pid_file = _start_check_on_sleeper(tmp_path)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)  # the command no longer holds our pipes open
    assert proc.returncode == status
    assert err.strip().splitlines() == [line]
    assert not _running(int(pid_file.read_text()))


def test_a_stop_that_comes_while_the_command_starts_is_raised_after() -> None:
    """A Ctrl-C or SIGTERM during ``Popen`` (which returns only once the command has started)
    is held back and raised once ``Popen`` has returned, where the command can be stopped."""
    from promptcache.check.runner import CheckTerminatedError, _DeferredStops, _terminated

    # Python's own Ctrl-C handler, as at an interactive start: a job started in the background
    # by a non-interactive shell inherits SIGINT ignored, and then no KeyboardInterrupt comes.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous = signal.signal(signal.SIGTERM, _terminated)  # as run_check sets it
    try:
        deferred = _DeferredStops()
        signal.raise_signal(signal.SIGINT)  # held: no KeyboardInterrupt here
        with pytest.raises(KeyboardInterrupt):
            deferred.replay()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

        deferred = _DeferredStops()
        signal.raise_signal(signal.SIGTERM)
        with pytest.raises(CheckTerminatedError):
            deferred.replay()
        assert signal.getsignal(signal.SIGTERM) is _terminated
        deferred = _DeferredStops()
        deferred.replay()  # nothing came: nothing raised
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def test_repeats_say_which_runs_they_came_from(tmp_path: Path) -> None:
    prog = _program(
        tmp_path,
        """
        import datetime, httpx
        for question in ("one", "two"):
            system = "You are careful. " * 400 + datetime.datetime.now().isoformat()
            httpx.post("https://api.openai.com/v1/chat/completions", json={"model": "gpt-4o",
                "messages": [{"role": "system", "content": system},
                             {"role": "user", "content": question}]})
        """,
    )
    result = run_check([sys.executable, prog], runs=3, stdout=sys.stderr)
    assert [len(r.requests) for r in result.runs] == [2, 2, 2]
    (finding,) = result.findings
    # two requests a run differ from the baseline's, in each of the two perturbed runs
    assert (finding.rule, finding.requests, finding.seen_in) == ("PC001", 4, (1, 2))
    assert "  seen in 4 requests from this call site, in runs 1 and 2" in render(result, "text")


def test_isolate_finds_an_id_behind_a_time_in_an_earlier_message() -> None:
    # the system prompt's time differs in every run (the unshifted clock ticks on); in the
    # random run the request id in the next message is the difference that run caused. The
    # program comes on standard input: run from pytest's tmp_path (a path with "pytest" in
    # it), the program read the same time to the microsecond in every run.
    source = textwrap.dedent(
        """
        import datetime, httpx, uuid
        system = "You are careful. " * 400 + datetime.datetime.now().isoformat()
        httpx.post("https://api.openai.com/v1/chat/completions", json={"model": "gpt-4o",
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": f"request {uuid.uuid4()}"},
                         {"role": "user", "content": "the question"}]})
        """
    )
    result = run_check(
        [sys.executable, "-"], isolate=True, stdout=sys.stderr, stdin=source.encode()
    )
    random_run = next(
        r.perturbation.run for r in result.runs if r.perturbation.changed == ("random",)
    )
    found = sorted((f.rule, f.path, f.causes, f.seen_in) for f in result.findings)
    assert found == [
        ("PC001", "messages[0].content", ("clock",), (1,)),
        ("PC002", "messages[1].content", ("random",), (random_run,)),
    ]


@pytest.mark.parametrize("args", [(), ("--",), ("--runs", "3")])
def test_no_command_is_one_error_line(args: tuple[str, ...]) -> None:
    done = _cli("check", *args)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: no COMMAND given: use `promptcache check -- python app.py`"
    ]


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (("--run", "3"), " (did you mean --runs?)"),
        (("--tim", "3"), " (did you mean --timeout?)"),
        (("--xyzzy",), ""),
        # the leading dashes alone made '--bogus' look like '--runs' (ratio 0.62)
        (("--bogus",), ""),
    ],
)
def test_an_unknown_option_is_named_not_run_as_the_command(
    args: tuple[str, ...], hint: str
) -> None:
    done = _cli("check", *args, "--", "python", "app.py")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: no such option {args[0]}{hint} for `promptcache check`; see "
        "`promptcache check --help`, and write the command after `--`: "
        "`promptcache check [OPTIONS] -- python app.py`"
    ]


def test_a_one_token_prefix_is_said_in_the_singular(tmp_path: Path) -> None:
    prog = _program(
        tmp_path,
        """
        import httpx
        httpx.post("https://api.anthropic.com/v1/messages", json={"model": "claude-sonnet-4-5",
            "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
            "system": [{"type": "text", "text": "short",
                        "cache_control": {"type": "ephemeral"}}]})
        """,
    )
    result = run_check([sys.executable, prog], stdout=sys.stderr)
    (finding,) = result.findings
    assert finding.rule == "PC008"
    assert "closes a prefix of about 1 token, below" in finding.message


def test_a_helper_that_wraps_the_client_names_its_callers(tmp_path: Path) -> None:
    prog = _program(
        tmp_path,
        """
        import datetime, httpx, uuid
        def post(system):
            httpx.post("https://api.openai.com/v1/chat/completions", json={"model": "gpt-4o",
                "messages": [{"role": "system", "content": "You are careful. " * 400 + system},
                             {"role": "user", "content": "hi"}]})
        post(datetime.datetime.now().isoformat())
        post(str(uuid.uuid4()))
        """,
    )
    result = run_check([sys.executable, prog], stdout=sys.stderr)
    lines = Path(prog).read_text().splitlines()
    post_line = next(i for i, text in enumerate(lines, 1) if "httpx.post(" in text)
    callers = [i for i, text in enumerate(lines, 1) if text.startswith("post(")]
    found = {f.rule: f.site for f in result.findings}
    assert set(found) == {"PC001", "PC002"}
    for rule, caller in zip(("PC001", "PC002"), callers, strict=True):
        site = found[rule]
        assert site is not None
        assert (site.line, site.function) == (post_line, "post")
        assert site.callers == ((prog, caller, "<module>"),)
    text = render(result, "text")
    assert f"  called from {prog}:{callers[0]} in <module>" in text


def test_sarif_findings_of_two_callers_of_one_helper_name_their_callers(tmp_path: Path) -> None:
    # the two results were the same text at the same line: which caller sent which request was
    # in the text and GitHub reports only
    prog = _program(
        tmp_path,
        """
        import datetime, httpx
        def post(question):
            httpx.post("https://api.openai.com/v1/chat/completions", json={"model": "gpt-4o",
                "messages": [{"role": "system", "content": "You are careful. " * 400
                              + datetime.datetime.now().isoformat()},
                             {"role": "user", "content": question}]})
        def morning():
            post("good morning")
        def evening():
            post("good evening")
        morning()
        evening()
        """,
    )
    result = run_check([sys.executable, prog], stdout=sys.stderr)
    lines = Path(prog).read_text().splitlines()
    line_of = {name: lines.index(f'    post("good {name}")') + 1 for name in ("morning", "evening")}
    at = {name: lines.index(f"{name}()") + 1 for name in ("morning", "evening")}
    doc = json.loads(render(result, "sarif"))
    texts = sorted(r["message"]["text"] for r in doc["runs"][0]["results"])
    assert [t.split("; called from ")[1] for t in texts] == [
        f"{prog}:{line_of['evening']} in evening, from {prog}:{at['evening']} in <module>",
        f"{prog}:{line_of['morning']} in morning, from {prog}:{at['morning']} in <module>",
    ]
    related = sorted(
        [
            (loc["physicalLocation"]["region"]["startLine"], loc["message"]["text"])
            for loc in r["relatedLocations"]
        ]
        for r in doc["runs"][0]["results"]
    )
    assert related == [
        [(line_of["morning"], "caller 1, in morning"), (at["morning"], "caller 2, in <module>")],
        [(line_of["evening"], "caller 1, in evening"), (at["evening"], "caller 2, in <module>")],
    ]


def test_a_one_message_prompt_that_differs_is_counted_in_a_note(tmp_path: Path) -> None:
    prog = _program(
        tmp_path,
        """
        import httpx, uuid
        for _ in range(2):
            httpx.post("https://api.openai.com/v1/completions", json={
                "model": "gpt-3.5-turbo-instruct", "prompt": str(uuid.uuid4()) + " go " * 2000})
        """,
    )
    result = run_check([sys.executable, prog], stdout=sys.stderr)
    assert result.findings == []
    assert result.notes == [
        "run 1: 2 request pair(s) differ in a prompt that is one message (a legacy completion's "
        "prompt, a lone user message), read as the dynamic tail; not reported"
    ]


def test_a_pool_worker_is_not_said_to_be_called_from_where_the_pool_forked(
    tmp_path: Path,
) -> None:
    # a forked worker's stack goes on below multiprocessing's process start into the parent's
    # frames at the fork: the request was said to be "called from prog.py:10 in <module>", the
    # `with Pool(2)` line, which calls no worker function
    prog = _program(
        tmp_path,
        """
        import multiprocessing, os, httpx

        def work(question):
            url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
            body = {"model": "gpt-4o", "messages": [{"role": "user", "content": question}]}
            return httpx.post(url, json=body, timeout=30).status_code

        if __name__ == "__main__":
            with multiprocessing.get_context("fork").Pool(2) as pool:
                print(pool.map(work, ["a", "b"]))
        """,
    )
    result = run_check([sys.executable, prog], stdout=sys.stderr)
    sites = [r.site for run in result.runs for r in run.requests]
    assert len(sites) == 4
    for site in sites:
        assert site is not None and (site.line, site.function) == (7, "work")
        assert site.callers == (), site.callers


FORCES_A_TOOL = """
import sys
import anthropic
import openai

KIND = sys.argv[1]
if KIND == "openai":
    reply = openai.OpenAI().chat.completions.create(
        model="o3-mini",
        messages=[{"role": "user", "content": "How many users are there?"}],
        tools=[{"type": "function", "function": {"name": "list_tables", "parameters": {}}}],
        tool_choice="required",
    )
    called = bool(reply.choices[0].message.tool_calls)
elif KIND == "gemini":
    import os

    import httpx

    reply = httpx.post(
        os.environ["GOOGLE_GEMINI_BASE_URL"] + "/v1beta/models/gemini-2.5-flash:generateContent",
        json={
            "contents": [{"role": "user", "parts": [{"text": "How many users are there?"}]}],
            "tools": [{"functionDeclarations": [{"name": "list_tables"}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        },
    ).json()
    called = any("functionCall" in p for p in reply["candidates"][0]["content"]["parts"])
else:
    choice = {"type": "tool", "name": "list_tables"} if KIND == "anthropic" else {"type": "auto"}
    message = anthropic.Anthropic().messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "How many users are there?"}],
        tools=[{"name": "list_tables", "input_schema": {"type": "object"}}],
        tool_choice=choice,
    )
    called = any(block.type == "tool_use" for block in message.content)
if not called:
    sys.exit("No function call in this response - should never happen")
"""


@pytest.mark.parametrize(
    ("kind", "asked"),
    [
        ("openai", 'tool_choice "required"'),
        ("anthropic", 'tool_choice {"type": "tool", "name": "list_tables"}'),
        ("gemini", 'functionCallingConfig mode "ANY"'),
        ("auto", None),
    ],
)
def test_a_run_that_fails_after_a_forced_tool_call_says_the_reply_never_calls_one(
    tmp_path: Path, kind: str, asked: str | None
) -> None:
    # disler's single-file agents send tool_choice="required" and raise on a reply without a
    # tool call: 'exited with status 1' alone would read as if the agent were broken
    program = tmp_path / "agent.py"
    program.write_text(FORCES_A_TOOL, encoding="utf-8")
    proc = _cli("check", "--", sys.executable, str(program), kind, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    failed = (
        "error: the command exited with status 1 in run 0 (baseline); any output it printed "
        "is above"
    )
    hint = (
        f"; its last request required a tool call ({asked}), and check's canned reply is a text "
        'that never calls a tool (docs/check.md, "What it cannot see")\n'
    )
    assert proc.stderr.endswith(failed + (hint if asked else "\n")), proc.stderr
