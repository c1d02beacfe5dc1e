"""Every kind of client through the capture endpoint (streaming, async, forked workers, raw
httpx and requests posts to the vendors' hosts), a command that fails, and --forward to a real
upstream on loopback."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from check_support import PROGRAMS, by_function, check_program, cli

from promptcache.check.runner import CheckResult, CommandFailedError, run_check

SITES = {
    "openai_stream": "openai_chat",
    "anthropic_stream": "anthropic",
    "ask_async": "anthropic",
    "responses_stream": "openai_responses",
    "worker": "openai_chat",
    "raw_httpx": "openai_chat",
    "raw_requests": "anthropic",
}


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> tuple[CheckResult, str]:
    return check_program(tmp_path_factory.mktemp("clients"), "clients.py")


def test_every_client_kind_is_captured_and_its_clock_found(
    clients: tuple[CheckResult, str],
) -> None:
    result, output = clients
    found = by_function(result)
    assert sorted(found) == sorted(SITES)
    for function, api in SITES.items():
        [finding] = found[function]
        assert (finding.rule, finding.causes, finding.api) == ("PC001", ("clock",), api)
    # 6 requests from the main process and one from each of the two pool workers, per run
    assert [sum(1 for q in r.requests if q.api) for r in result.runs] == [8, 8]
    # the canned answers parsed: each client printed the reply text (or the last stream event)
    assert output.count("This is a canned reply from promptcache check.") == 2 * (5 + 2)
    assert output.count("response.completed") == 2


def test_forked_workers_report_their_own_pids(clients: tuple[CheckResult, str]) -> None:
    result, _ = clients
    for run in result.runs:
        main_pid = run.perturbation.pid
        workers = [q for q in run.requests if q.site is not None and q.site.function == "worker"]
        assert len(workers) == 2
        assert {q.pid for q in workers}.isdisjoint({main_pid})
        others = {q.pid for q in run.requests if q not in workers}
        assert others == {main_pid}


def test_raw_posts_to_vendor_hosts_are_rerouted(clients: tuple[CheckResult, str]) -> None:
    result, _ = clients
    raw = [q for q in result.runs[0].requests if q.site and q.site.function.startswith("raw_")]
    assert {q.headers["x-promptcache-check-upstream"] for q in raw} == {
        "https://api.openai.com/v1/chat/completions",
        "https://api.anthropic.com/v1/messages",
    }


def test_a_failing_command_is_exit_2_naming_the_run(tmp_path: Path) -> None:
    with pytest.raises(CommandFailedError, match=r"status 3 in run 0 \(baseline\)"):
        check_program(tmp_path, "fails.py")
    proc = cli("check", "--", sys.executable, str(PROGRAMS / "fails.py"))
    assert proc.returncode == 2
    assert "the program's own output" in proc.stdout  # passed through
    assert proc.stderr.strip() == (
        "error: the command exited with status 3 in run 0 (baseline); any output it printed "
        "is above"
    )


@pytest.mark.parametrize(
    ("runner", "status", "meaning"),
    [
        (("-m", "pytest"), 1, "pytest: tests failed; check needs a session that passes"),
        (
            ("-m", "pytest", "-k", "no_such_test"),
            5,
            "pytest: no tests ran: none collected, or all deselected",
        ),
    ],
)
def test_a_failing_pytest_command_says_what_its_status_means(
    tmp_path: Path, runner: tuple[str, ...], status: int, meaning: str
) -> None:
    # "exited with status 5" alone: pytest's statuses say why (5: nothing collected)
    (tmp_path / "test_fails.py").write_text("def test_no():\n    assert False\n")
    proc = cli(
        "check", "--", sys.executable, *runner, "-q", "-p", "no:cacheprovider", "test_fails.py",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: the command exited with status {status} ({meaning}) in run 0 (baseline); any "
        "output it printed is above"
    )


def test_a_missing_command_is_a_one_line_error() -> None:
    proc = cli("check", "--", "no-such-program-promptcache")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: cannot run 'no-such-program-promptcache'")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("command", "says"),
    [
        # each said only the OS's words ('Permission denied' for an empty command and a folder)
        ("", "the command is empty; give a program, e.g. `promptcache check -- python app.py`"),
        ("./folder", "Permission denied: it is a folder, not a program"),
        ("./smoke.sh", "the file is not executable; run it through its interpreter"),
        ("./bare.sh", "the file has no #! line naming its interpreter; run it through one"),
        ("cd", "no such program on PATH (a shell builtin or alias needs a shell"),
        # these three said only that no such program is on PATH
        (
            "smoke.sh",
            "no program on PATH is named smoke.sh; the file of that name in this folder is run "
            "through its interpreter (sh smoke.sh) or by its path (./smoke.sh)",
        ),
        (
            "LANG=C",
            "LANG=C sets an environment variable, which only a shell reads: put it before "
            "promptcache (LANG=C promptcache check -- ...) or run the command through env "
            "(promptcache check -- env LANG=C ...)",
        ),
        (
            "sh smoke.sh",
            "the command is one word holding spaces; give the program and each argument as "
            "words of their own: promptcache check -- sh smoke.sh",
        ),
    ],
)
def test_a_command_that_cannot_start_says_what_to_run_instead(
    tmp_path: Path, command: str, says: str
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "smoke.sh").write_text("#!/bin/sh\necho hi\n")  # not executable
    (tmp_path / "bare.sh").write_text("echo hi\n")
    (tmp_path / "bare.sh").chmod(0o755)
    proc = cli("check", "--", command, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: cannot run {command!r}: ")
    assert says in proc.stderr and proc.stderr.count("\n") == 1


class _Upstream(BaseHTTPRequestHandler):
    """A vendor stand-in: answers chat completions as OpenAI would, streaming or not."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, dict[str, str], bytes]] = []  # noqa: RUF012

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        chunk = {"id": "u1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        if json.loads(body).get("stream"):
            events = [
                {**chunk, "choices": [{"index": 0, "delta": {"content": f"up{i} "}}]}
                for i in range(3)
            ]
            raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            self._reply("text/event-stream", raw.encode())
            return
        message = {"role": "assistant", "content": f"from the upstream {len(self.seen)}"}
        reply = {**chunk, "object": "chat.completion", "choices": [
            {"index": 0, "message": message, "finish_reason": "stop"}
        ]}  # fmt: skip
        self._reply("application/json", json.dumps(reply).encode())

    def _reply(self, content_type: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Upstream.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


FORWARDED = """
import openai
client = openai.OpenAI()
messages = [{"role": "system", "content": "Rule. " * 600}, {"role": "user", "content": "hi"}]
reply = client.chat.completions.create(model="m", messages=messages).choices[0].message.content
print(reply)
messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "more"}]
stream = client.chat.completions.create(model="m", messages=messages, stream=True)
print("".join(c.choices[0].delta.content or "" for c in stream))
"""


def test_forward_sends_each_request_to_the_upstream(tmp_path: Path, upstream: str) -> None:
    program = tmp_path / "forwarded.py"
    program.write_text(FORWARDED, encoding="utf-8")
    out = tmp_path / "out.txt"
    env = {**__import__("os").environ, "OPENAI_BASE_URL": upstream}
    with out.open("w") as handle:
        result = run_check([sys.executable, str(program)], forward=True, env=env, stdout=handle)
    # the upstream's replies differ from run to run (they count its requests)
    assert out.read_text().splitlines() == [
        "from the upstream 1",
        "up0 up1 up2 ",
        "from the upstream 3",
        "up0 up1 up2 ",
    ]
    assert [path for path, _, _ in _Upstream.seen] == ["/v1/chat/completions"] * 4
    # the second request carries that reply as history: the model's doing, not a cache breaker
    assert result.findings == []
    for _, headers, _ in _Upstream.seen:
        assert not [name for name in headers if name.startswith("x-promptcache-check")]
    captured = [q.body for r in result.runs for q in r.requests]
    assert captured == [body for _, _, body in _Upstream.seen]
    assert [q.status for r in result.runs for q in r.requests] == [200] * 4


UNREACHABLE = """
import httpx, os
reply = httpx.post(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
)
print(reply.status_code)
"""


def test_forward_to_an_upstream_that_fails_says_so_in_a_note(tmp_path: Path, upstream: str) -> None:
    # every forwarded request got a 502 (no upstream listening) and check said only
    # "0 findings", exit 0: a CI job with a wrong upstream passed without a word
    program = tmp_path / "unreachable.py"
    program.write_text(UNREACHABLE, encoding="utf-8")
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    out = tmp_path / "out.txt"
    env = {**__import__("os").environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{closed}/v1"}
    with out.open("w") as handle:
        result = run_check([sys.executable, str(program)], forward=True, env=env, stdout=handle)
    assert out.read_text().split() == ["502", "502"]
    assert result.exit_code == 0 and result.findings == []
    assert result.notes == [
        f"run {k}: 1 forwarded LLM request(s) got an error answer, HTTP 502 (502: the upstream "
        "could not be reached): the command may have sent fewer or other requests than it "
        "would to a working API"
        for k in (0, 1)
    ]
    # the look-alike: a working upstream leaves no such note
    env["OPENAI_BASE_URL"] = upstream
    with out.open("w") as handle:
        result = run_check([sys.executable, str(program)], forward=True, env=env, stdout=handle)
    assert out.read_text().split() == ["200", "200"] and result.notes == []


MIXED = """
import os, httpx, openai
body = {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "hi"}]}
print(openai.OpenAI().chat.completions.create(**body).choices[0].message.content)
local = openai.OpenAI(base_url=os.environ["LOCAL_URL"], max_retries=0)
print(local.chat.completions.create(**body).choices[0].message.content)
azure = os.environ["LOCAL_URL"] + "/chat/completions?api-version=1&api-key=secret"
print(httpx.post(azure, json=body).status_code)
print(httpx.post(os.environ["LOCAL_URL"] + "/embeddings", json={"input": "x"}).status_code)
"""


def test_a_client_with_its_own_base_url_beside_captured_ones_is_noted(
    tmp_path: Path, upstream: str
) -> None:
    # one client read OPENAI_BASE_URL and was captured, so run 0 was not empty and check said
    # nothing of the client that sent its requests to its own base_url, uncompared
    program = tmp_path / "mixed.py"
    program.write_text(MIXED, encoding="utf-8")
    out = tmp_path / "out.txt"
    env = {**__import__("os").environ, "LOCAL_URL": upstream}
    with out.open("w") as handle:
        result = run_check([sys.executable, str(program)], env=env, stdout=handle, cwd=tmp_path)
    assert [sum(1 for q in r.requests if q.api) for r in result.runs] == [1, 1]
    assert len(_Upstream.seen) == 6  # both runs reached the local server, the key with them
    url = f"{upstream}/chat/completions"
    assert result.notes == [
        f"run {k}: 2 request(s) to an LLM API route went past the capture endpoint (the first "
        f"to {url}, from {program}:7 in <module>): a client given its own base_url is not "
        "captured, so they were not compared; read the URL from OPENAI_BASE_URL or "
        'ANTHROPIC_BASE_URL, which check sets (docs/check.md, "What it cannot see")'
        for k in (0, 1)
    ]


OWN_BASE_URL = """
import os, sys, openai
body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
openai.OpenAI().chat.completions.create(**body)  # captured
if sys.argv[1] == "own":
    local = openai.OpenAI(base_url=os.environ["LOCAL_URL"], max_retries=0)
    local.chat.completions.create(**body)  # a proxy that is not running: connection refused
sys.exit(1)
"""


@pytest.mark.parametrize("kind", ["own", "captured"])
def test_a_run_that_fails_sending_past_the_endpoint_says_so(tmp_path: Path, kind: str) -> None:
    # a coding agent whose client reads its own setting (base_url=settings.LLM_BASE_URL, a
    # LiteLLM proxy at localhost:4444 by default) failed with openai's 'Connection error.' and
    # only 'exited with status 1 in run 0': the note on requests sent past the endpoint came
    # only with runs that succeed
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    program = tmp_path / "agent.py"
    program.write_text(OWN_BASE_URL, encoding="utf-8")
    env = {**__import__("os").environ, "LOCAL_URL": f"http://127.0.0.1:{closed}/v1"}
    with (tmp_path / "out.txt").open("w") as out, pytest.raises(CommandFailedError) as failed:
        run_check([sys.executable, str(program), kind], env=env, stdout=out)
    said = str(failed.value)
    assert said.startswith("the command exited with status 1 in run 0 (baseline); ")
    if kind == "captured":
        assert said.endswith("; any output it printed is above"), said
        return
    assert said.endswith(
        "; any output it printed is above; it sent 1 request(s) to an LLM API route past the "
        f"capture endpoint (the first to http://127.0.0.1:{closed}/v1/chat/completions, from "
        f"{program}:7 in <module>), which check neither answers nor captures: a client given "
        "its own base_url; read the URL from OPENAI_BASE_URL or ANTHROPIC_BASE_URL, which check "
        'sets (docs/check.md, "What it cannot see")'
    ), said


def test_a_failed_run_s_requests_past_the_endpoint_count_their_other_urls() -> None:
    # the error of a failed run said where the first request past the endpoint went, but not
    # that others went elsewhere, which the note of a run that succeeds says
    from promptcache.check.runner import Passed, _went_past

    one = Passed("http://127.0.0.1:4444/v1/chat/completions", None)
    other = Passed("http://127.0.0.1:5555/v1/messages", None)
    said = _went_past([one, other, one])
    assert said.startswith(
        f"; it sent 3 request(s) to an LLM API route past the capture endpoint (the first to "
        f"{one.url}; 1 other URL(s)), which check neither answers nor captures"
    ), said
    assert "1 other URL" not in _went_past([one, one])
    assert _went_past([]) == ""


SETS_ITS_OWN_BASE_URL = """
import os, sys, openai
body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
if sys.argv[1] == "environ":  # what load_dotenv(override=True) does with a .env naming a gateway
    os.environ["OPENAI_BASE_URL"] = os.environ["LOCAL_URL"]
    client = openai.OpenAI(max_retries=0)
else:  # the look-alike: the client is given the URL, check's variable left alone
    client = openai.OpenAI(base_url=os.environ["LOCAL_URL"], max_retries=0)
print(client.chat.completions.create(**body).choices[0].message.content)
if sys.argv[2] == "fail":
    sys.exit(1)
"""


@pytest.mark.parametrize("kind", ["environ", "argument"])
def test_a_base_url_variable_the_program_sets_over_check_s_is_named(
    tmp_path: Path, upstream: str, kind: str
) -> None:
    # a program that sets OPENAI_BASE_URL itself (load_dotenv(override=True) and a .env file
    # naming a gateway) sent past the endpoint and was told to 'read the URL from
    # OPENAI_BASE_URL', which is what its client already did
    program = tmp_path / "dotenv_app.py"
    program.write_text(SETS_ITS_OWN_BASE_URL, encoding="utf-8")
    env = {**__import__("os").environ, "LOCAL_URL": upstream}
    with (tmp_path / "out.txt").open("w") as out:
        result = run_check([sys.executable, str(program), kind, "ok"], env=env, stdout=out)
    # both runs reached the program's own server
    assert (tmp_path / "out.txt").read_text().splitlines() == [
        "from the upstream 1",
        "from the upstream 2",
    ]
    first = f"(the first to {upstream}/chat/completions, from {program}:9 in <module>)"
    if kind == "environ":
        cause = (
            "the command set OPENAI_BASE_URL, which check points at its endpoint, to that URL "
            "itself (load_dotenv(override=True) does, from a .env file)"
        )
        uncompared = ", so they were not compared"
        advice = (
            "leave check's OPENAI_BASE_URL in place while checking (load_dotenv() without "
            'override keeps it; docs/check.md, "What it cannot see")'
        )
    else:
        cause = "a client given its own base_url"
        uncompared = " is not captured, so they were not compared"
        advice = (
            "read the URL from OPENAI_BASE_URL or ANTHROPIC_BASE_URL, which check sets "
            '(docs/check.md, "What it cannot see")'
        )
    assert result.notes == [
        *(
            f"run {k}: 1 request(s) to an LLM API route went past the capture endpoint "
            f"{first}: {cause}{uncompared}; {advice}"
            for k in (0, 1)
        ),
        "no LLM request was captured in run 0, so nothing was compared: the command sent them "
        "all past the capture endpoint (the note above says where and why)",
    ]
    # a run that fails says the same in its error
    with (tmp_path / "out.txt").open("w") as out, pytest.raises(CommandFailedError) as failed:
        run_check([sys.executable, str(program), kind, "fail"], env=env, stdout=out)
    said = str(failed.value)
    assert said.endswith(
        f"; it sent 1 request(s) to an LLM API route past the capture endpoint {first}, which "
        f"check neither answers nor captures: {cause}; {advice}"
    ), said


STANDARD_LIBRARY_ONLY = """
import json, os, urllib.request, uuid
system = f"Request {uuid.uuid4()}. " + "Answer briefly. " * 400
body = {"model": "gpt-4o-mini", "messages": [
    {"role": "system", "content": system}, {"role": "user", "content": "hi"}]}

def ask(url):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    return json.load(urllib.request.urlopen(request))["choices"][0]["message"]["content"]

print(ask("https://api.openai.com/v1/chat/completions"))  # straight to the vendor's host
print(ask(os.environ["LOCAL_URL"] + "/chat/completions"))  # the program's own server
"""


def test_urllib_requests_are_tagged_and_rerouted_like_the_http_libraries(
    tmp_path: Path, upstream: str
) -> None:
    # a standard-library script's urlopen carried no call site, so its uuid in the system
    # prompt read 'unexplained' at '(call site unknown)', and its post straight to
    # api.openai.com was not rerouted: it went to the real API, without --forward
    program = tmp_path / "stdlib_app.py"
    program.write_text(STANDARD_LIBRARY_ONLY, encoding="utf-8")
    env = {**__import__("os").environ, "LOCAL_URL": upstream}
    with (tmp_path / "out.txt").open("w") as out:
        result = run_check([sys.executable, str(program)], env=env, stdout=out)
    assert (tmp_path / "out.txt").read_text().splitlines() == [
        "This is a canned reply from promptcache check.",
        "from the upstream 1",
        "This is a canned reply from promptcache check.",
        "from the upstream 2",
    ]
    assert [
        [(q.headers.get("x-promptcache-check-upstream"), q.hooked) for q in r.requests]
        for r in result.runs
    ] == [[("https://api.openai.com/v1/chat/completions", True)]] * 2
    [finding] = result.findings
    assert (finding.rule, finding.causes) == ("PC002", ("random",))
    assert finding.site is not None
    assert (finding.site.path, finding.site.line, finding.site.function) == (
        str(program),
        10,
        "ask",
    )
    assert finding.site.callers == ((str(program), 12, "<module>"),)
    # the look-alike: the post to the program's own server went there untagged, and is noted
    assert len(_Upstream.seen) == 2
    tagged = [k for _, headers, _ in _Upstream.seen for k in headers if "promptcache" in k]
    assert tagged == []
    assert [n.partition(" (")[0] for n in result.notes] == [
        f"run {k}: 1 request(s) to an LLM API route went past the capture endpoint" for k in (0, 1)
    ]
    assert f"from {program}:10 in ask" in result.notes[0]


HANDED_TO_A_THREAD = """
import asyncio, sys, time
from concurrent.futures import ThreadPoolExecutor
from openai import OpenAI

client = OpenAI()


def messages(question):
    system = f"Uptime {time.monotonic():.6f} s." + " Be careful." * 400
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


async def ask(question):
    return await asyncio.to_thread(
        client.chat.completions.create, model="gpt-4o-mini", messages=messages(question)
    )


def ask_in_a_worker(question):
    return client.chat.completions.create(model="gpt-4o-mini", messages=messages(question))


async def main():
    if sys.argv[1] == "to_thread":
        await ask("hi")
    else:
        with ThreadPoolExecutor() as pool:
            pool.submit(ask_in_a_worker, "hi").result()


asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("kind", "site", "callers"),
    [
        ("to_thread", ("ask", 15), [("main", 26), ("<module>", 32)]),
        ("submit", ("ask_in_a_worker", 21), []),
    ],
)
def test_a_request_sent_from_a_worker_thread_is_named_where_it_was_handed_over(
    tmp_path: Path, kind: str, site: tuple[str, int], callers: list[tuple[str, int]]
) -> None:
    # a robot agent calls `await asyncio.to_thread(self.client.chat.completions.create, ...)`:
    # the worker thread's stack holds only threading, concurrent.futures and openai, and both
    # of its findings read '(call site unknown)'. A function of the program's run in the worker
    # is still the call site itself, with no caller from the thread that submitted it
    program = tmp_path / "agent.py"
    program.write_text(HANDED_TO_A_THREAD, encoding="utf-8")
    with (tmp_path / "out.txt").open("w") as out:
        result = run_check([sys.executable, str(program), kind], stdout=out)
    [finding] = result.findings
    assert (finding.rule, finding.causes) == ("PC002", ("unexplained",))
    assert finding.site is not None
    assert (finding.site.path, finding.site.function, finding.site.line) == (
        str(program),
        *site,
    )
    assert [(function, line) for _, line, function in finding.site.callers] == callers


IN_A_TASK = """
import asyncio, contextvars, sys, time
from openai import AsyncOpenAI

client = AsyncOpenAI()
system = f"Uptime {time.monotonic():.6f} s." + " Be careful." * 400
messages = [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]


async def main():
    call = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    if sys.argv[1] == "task":
        await asyncio.create_task(call)  # TASK
    elif sys.argv[1] == "task_with_context":
        loop = asyncio.get_running_loop()
        await loop.create_task(call, context=contextvars.copy_context())  # CONTEXT
    else:
        await call  # AWAIT


asyncio.run(main())  # RUN
"""


@pytest.mark.parametrize(
    ("kind", "marker"), [("task", "TASK"), ("task_with_context", "CONTEXT"), ("await", "AWAIT")]
)
def test_a_request_sent_from_a_task_is_named_where_the_task_was_made(
    tmp_path: Path, kind: str, marker: str
) -> None:
    # LangChain's astream runs the model call in a task it creates (passing a context of its
    # own): that task's stack holds no frame of the user's code, and the walk went on below
    # the event loop to 'asyncio.run(main())', so the finding named the <module> line. Awaited
    # in place, the call's site is the await (the look-alike, unchanged)
    program = tmp_path / "agent.py"
    program.write_text(IN_A_TASK, encoding="utf-8")
    lines = IN_A_TASK.splitlines()
    line_of = {
        m: next(i for i, t in enumerate(lines, 1) if t.endswith(f"# {m}"))
        for m in ("TASK", "CONTEXT", "AWAIT", "RUN")
    }
    with (tmp_path / "out.txt").open("w") as out:
        result = run_check([sys.executable, str(program), kind], stdout=out)
    [finding] = result.findings
    assert finding.site is not None
    assert (finding.site.function, finding.site.line) == ("main", line_of[marker])
    assert [(f, n) for _, n, f in finding.site.callers] == [("<module>", line_of["RUN"])]
