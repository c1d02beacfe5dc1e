"""Run COMMAND once per perturbation against the capture endpoint, then compare the runs.

The runs are sequential: each costs the program's own time plus the capture overhead
(``benchmarks/check_overhead.py``). The program's output passes through (its stdout to
``stdout``, its stderr to ours). A run that exits non-zero stops the check:
:class:`CommandFailedError` names the run and its status.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Final, NamedTuple

from promptcache.errors import ConfigError, PromptCacheError
from promptcache.fingerprint import fingerprint_request
from promptcache.minimums import ModelMinimums, default_model_minimums

from .capture import CallSite, CapturedRequest, CaptureServer
from .child import PASSED_ENV
from .findings import CAUSE_RULES, UNEXPLAINED, Finding
from .pairing import Sent, compare_runs
from .perturbation import Perturbation, plan_runs
from .structure import structure_findings

__all__ = [
    "CheckResult",
    "CheckTerminatedError",
    "CommandFailedError",
    "CommandTimeoutError",
    "RunResult",
    "run_check",
]

#: Dummy keys set where the environment has none, so clients start without a real key.
DUMMY_KEYS: dict[str, str] = {
    "ANTHROPIC_API_KEY": "sk-ant-promptcache-check",
    "OPENAI_API_KEY": "sk-promptcache-check",
    "GEMINI_API_KEY": "promptcache-check",
}


#: Seconds a timed-out command gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 5.0


class CommandFailedError(PromptCacheError):
    """COMMAND exited non-zero (or could not start) in one of the runs."""


#: What pytest's exit statuses mean (``pytest.ExitCode``), said when a checked session fails.
PYTEST_STATUSES: Final[Mapping[int, str]] = {
    1: "pytest: tests failed; check needs a session that passes",
    2: "pytest: interrupted",
    3: "pytest: internal error",
    4: "pytest: usage error",
    5: "pytest: no tests ran: none collected, or all deselected",
}


def runs_pytest(command: Sequence[str]) -> bool:
    """Whether ``command`` is a pytest session: ``pytest ...``, ``python -m pytest ...`` or
    ``uv run pytest ...`` (``run pytest`` of any runner)."""
    if not command:
        return False
    if os.path.basename(command[0]) in ("pytest", "py.test"):
        return True
    pairs = itertools.pairwise(command)
    return any(a in ("-m", "run") and b in ("pytest", "py.test") for a, b in pairs)


@dataclass(frozen=True)
class CommandNames:
    """How a failed run's error names what ran: ``promptcache check`` runs "the command" with
    ``--timeout``; the pytest plugin runs "the test session" with its own option, and says what
    pytest's exit statuses mean."""

    subject: str = "the command"
    timeout_option: str = "--timeout"
    statuses: Mapping[int, str] = field(default_factory=dict)


class CommandTimeoutError(CommandFailedError):
    """COMMAND ran past ``--timeout`` in one of the runs and was killed."""


class CheckTerminatedError(PromptCacheError):
    """The check itself got SIGTERM; the running command was stopped with it."""


def _terminated(signum: int, frame: object) -> None:
    raise CheckTerminatedError(
        f"promptcache check got {signal.Signals(signum).name}; the command was stopped"
    )


class Passed(NamedTuple):
    """An LLM API call a hooked process sent to another host than the capture endpoint."""

    url: str  #: without its query or user info
    site: CallSite | None
    #: the base-URL variable check set that the process had set to this URL's base itself
    #: (``load_dotenv(override=True)``), else ``""``: a client given its own ``base_url``
    variable: str = ""


@dataclass
class RunResult:
    """One run of COMMAND.

    Attributes:
        perturbation: what it changed.
        exit_status: the command's exit status.
        duration_s: wall time of the run, seconds.
        requests: every request the endpoint received during it, in arrival order.
        passed: the LLM API calls its hooked processes sent to another host than the
            endpoint (a client given its own ``base_url``, or a base-URL variable the
            program set over check's), not captured.
    """

    perturbation: Perturbation
    exit_status: int
    duration_s: float
    requests: list[CapturedRequest] = field(default_factory=list)
    passed: list[Passed] = field(default_factory=list)

    def describe(self) -> str:
        """What this run did: ``Perturbation.describe``, but a clock change the hook could not
        make (the child's Python lacks time-machine) is said as not made."""
        plan = self.perturbation
        hooked = [r for r in self.requests if r.hooked]
        unmoved = [r.clock_problem for r in hooked if r.clock_problem]
        if "clock" not in plan.changed or not unmoved:
            return plan.describe()
        labels = plan.labels()
        at = plan.changed.index("clock")
        if len(unmoved) < len(hooked):
            labels[at] = (
                f"{labels[at][:-1]}, but not in the processes of {len(unmoved)} of "
                f"{len(hooked)} request(s): {unmoved[0]})"
            )
            return f"run {plan.run}: changes " + "; ".join(labels)
        del labels[at]
        unchanged = f"the wall clock was not moved ({unmoved[0]})"
        if not labels:
            return f"run {plan.run}: changes nothing: {unchanged}"
        return f"run {plan.run}: changes " + "; ".join(labels) + f"; {unchanged}"


@dataclass
class CheckResult:
    """Everything one check found.

    Attributes:
        command: COMMAND as run.
        runs: one per run, baseline first.
        findings: merged (one per call site, rule, path and cause), call-site order.
        notes: sentences about what was not compared or could not be read.
    """

    command: list[str]
    runs: list[RunResult]
    findings: list[Finding]
    notes: list[str]

    @property
    def exit_code(self) -> int:
        """1 with findings, else 0."""
        return 1 if self.findings else 0


def _not_user_dirs() -> list[str]:
    """promptcache's own folders (found without importing them): frames there are not the
    user's code."""
    import importlib.util

    dirs = set()
    for name in ("promptcache", *(f"promptcache.{sub}" for sub in _SUBPACKAGES)):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            dirs.add(str(Path(spec.origin).resolve().parent))
    return sorted(dirs)


_SUBPACKAGES = ("lint_rules", "proxy", "engine", "kernels")


_REWRITE_WARNING = (
    "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning"
)


def _child_env(
    base: Mapping[str, str],
    run: Perturbation,
    server: CaptureServer,
    not_user: Sequence[str],
    passed_log: str,
) -> dict[str, str]:
    env = run.env(base, server.origin, not_user)
    env.update(server.base_urls())
    env[PASSED_ENV] = passed_log
    # The hook imports time-machine before pytest loads plugins, and time-machine is a pytest
    # plugin: pytest would warn in every run that it cannot rewrite its asserts.
    env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} -W {_REWRITE_WARNING!r}".strip()
    for name, value in DUMMY_KEYS.items():
        env.setdefault(name, value)
    return env


def _readable(requests: Sequence[CapturedRequest]) -> tuple[list[Sent], int]:
    """The requests with a prompt, fingerprinted; and how many prompt requests were not."""
    out: list[Sent] = []
    bad = 0
    for request in requests:
        if request.api is None:
            continue
        body = request.json_body
        if not isinstance(body, dict):
            bad += 1
            continue
        try:
            fp = fingerprint_request(body, request.api)
        except (PromptCacheError, ValueError):
            bad += 1
            continue
        key = body.get("prompt_cache_key")
        out.append(Sent(request, fp, key if isinstance(key, str) and key else None))
    return out, bad


def _merge(findings: Sequence[Finding]) -> list[Finding]:
    merged: dict[tuple[object, ...], Finding] = {}
    for finding in findings:
        key = finding.key()
        runs = finding.seen_in or (finding.run,)
        if key in merged:
            kept = merged[key]
            merged[key] = replace(
                kept, requests=kept.requests + 1, seen_in=tuple(sorted({*kept.seen_in, *runs}))
            )
        else:
            merged[key] = replace(finding, seen_in=runs)
    return list(merged.values())


#: Finding paths whose rule is the field's, whatever the cause (``pairing._key_findings``).
_KEY_PATHS: Final = frozenset({"prompt_cache_key", "model"})


def _several_kinds_unexplained(
    findings: Sequence[Finding], perturbed: Sequence[Perturbation]
) -> list[Finding]:
    """``findings`` with the differences that the runs of two kinds or more show
    (``--isolate``), at one call site and path and from the same baseline text, made
    :data:`UNEXPLAINED`.

    Each isolated run changes one kind and names it as the cause of what differs from run 0;
    a run keeps every other kind as run 0 has it, so a value that differs from the baseline's
    in the runs of two kinds is neither of them (a monotonic clock, an uptime, a counter an
    earlier run left on disk; a time that merely ticked on is left out of the other kinds'
    runs before this, and the clock's own run may count it as the time it shows beside it).
    Findings of runs that change several kinds are returned as they are.

    Args:
        findings: the difference and structure findings of every perturbed run, unmerged.
        perturbed: the perturbed runs' perturbations (runs 1 and later).
    """
    kinds = {p.changed[0] for p in perturbed if len(p.changed) == 1}
    if len(kinds) < 2 or any(len(p.changed) != 1 for p in perturbed):
        return list(findings)
    kind_of = {p.run: p.changed[0] for p in perturbed}
    shown: dict[tuple[object, ...], set[str]] = {}
    for f in findings:
        if f.check == "difference" and f.before is not None:
            shown.setdefault((f.site, f.path, f.before), set()).add(kind_of[f.run])
    out = []
    for f in findings:
        if f.check == "difference" and len(shown.get((f.site, f.path, f.before), ())) >= 2:
            rule = f.rule if f.path in _KEY_PATHS else CAUSE_RULES[UNEXPLAINED]
            f = replace(f, causes=(UNEXPLAINED,), rule=rule, moved_in=None)
        out.append(f)
    return out


def _site_words(site: CallSite) -> str:
    """``app.py:12 in main``, the path relative to the current folder where it can be."""
    try:
        path = Path(site.path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        path = site.path
    return f"{path}:{site.line} in {site.function}"


def analyse(
    runs: Sequence[RunResult], minimums: ModelMinimums | None = None, *, forwarded: bool = False
) -> tuple[list[Finding], list[str]]:
    """Findings and notes of finished runs (run 0 is the baseline); ``forwarded``: the answers
    came from a real model, whose replies differ from run to run."""
    minimums = minimums if minimums is not None else default_model_minimums()
    readable = []
    notes: list[str] = []
    for run in runs:
        sents, bad = _readable(run.requests)
        readable.append(sents)
        if bad:
            notes.append(
                f"run {run.perturbation.run}: {bad} request(s) to a prompt route had no body "
                "promptcache can read as that API; they were not compared"
            )
        unshifted = [r.clock_problem for r in run.requests if r.clock_problem]
        if unshifted:
            notes.append(
                f"run {run.perturbation.run}: {len(unshifted)} request(s) came from processes "
                f"whose clock the hook could not move ({unshifted[0]}): a time value in them "
                "was not perturbed"
            )
        failed = [r.status for r in run.requests if forwarded and r.api and r.status >= 400]
        if failed:
            statuses = ", ".join(str(s) for s in sorted(set(failed)))
            unreachable = " (502: the upstream could not be reached)" if 502 in failed else ""
            notes.append(
                f"run {run.perturbation.run}: {len(failed)} forwarded LLM request(s) got an "
                f"error answer, HTTP {statuses}{unreachable}: the command may have sent fewer "
                "or other requests than it would to a working API"
            )
        if run.passed:
            notes.append(
                f"run {run.perturbation.run}: {len(run.passed)} request(s) to an LLM API route "
                f"went past the capture endpoint ({_first_past(run.passed)}): "
                f"{_past_why(run.passed, note=True)}"
            )
        unhooked = sum(1 for r in run.requests if not r.hooked)
        if unhooked:
            notes.append(
                f"run {run.perturbation.run}: {unhooked} request(s) came without the in-process "
                "hook's headers (from a process without the hook: not Python, or python -I/-S; "
                "or through a client other than httpx, httpx2, requests, aiohttp and urllib): "
                "no call site, and in a process without the hook the clock, random, listing and "
                "pid changes did not apply to them"
            )
    if not readable[0]:
        prompts = sum(1 for r in runs[0].requests if r.api is not None)
        others = len(runs[0].requests) - prompts
        if prompts:
            notes.append(
                f"none of run 0's {prompts} LLM request(s) could be read, so nothing was compared"
            )
        elif others:
            missing = sum(1 for r in runs[0].requests if r.status == 404)
            notes.append(
                f"no LLM request was captured in run 0, so nothing was compared: the command "
                f"sent {others} request(s) to routes of the capture endpoint that carry no "
                "prompt it compares (such as embeddings, count_tokens or GET /v1/models)"
                + (f", {missing} of them answered 404" if missing else "")
            )
        elif runs[0].passed:
            notes.append(
                "no LLM request was captured in run 0, so nothing was compared: the command "
                "sent them all past the capture endpoint (the note above says where and why)"
            )
        else:
            notes.append(
                "no LLM request was captured in run 0, so nothing was compared: the command "
                "sent none to the capture endpoint (a client given its own base_url, such as "
                "a local server's, sends past it: read the URL from OPENAI_BASE_URL or "
                'ANTHROPIC_BASE_URL, which check sets; see docs/check.md, "What it cannot '
                'see")'
            )
    findings = structure_findings(readable[0], minimums)
    for run, sents in zip(runs[1:], readable[1:], strict=True):
        # each run's clock from its start to its end (it ticks from where the run set it)
        clocks = [
            runs[0].perturbation.clock,
            runs[0].perturbation.clock + runs[0].duration_s,
            run.perturbation.clock,
            run.perturbation.clock + run.duration_s,
        ]
        report = compare_runs(
            readable[0], sents, run.perturbation, clocks, minimums, replies_vary=forwarded
        )
        findings += report.findings
        if report.unpaired:
            notes.append(
                f"run {run.perturbation.run}: {report.unpaired} request(s) had no partner at "
                "their call site in the other run (the runs sent different numbers of "
                "requests there); they were not compared"
            )
        if report.below_minimum:
            notes.append(
                f"run {run.perturbation.run}: {report.below_minimum} request pair(s) differ only "
                "in prompts shorter than the model's minimum cacheable prefix (nothing is "
                "cached there yet); not reported"
            )
        if report.one_message:
            notes.append(
                f"run {run.perturbation.run}: {report.one_message} request pair(s) differ in a "
                "prompt that is one message (a legacy completion's prompt, a lone user message), "
                "read as the dynamic tail; not reported"
            )
        if report.no_breakpoint:
            notes.append(
                f"run {run.perturbation.run}: {report.no_breakpoint} request pair(s) differ in "
                "Anthropic/Bedrock requests that carry no cache breakpoint (those APIs cache "
                "nothing unasked); not reported"
            )
    merged = _merge(_several_kinds_unexplained(findings, [r.perturbation for r in runs[1:]]))
    merged.sort(
        key=lambda f: (
            f.site is None,
            f.site.path if f.site else "",
            f.site.line if f.site else 0,
            f.rule,
        )
    )
    return merged, notes


def _signal_command(proc: subprocess.Popen[bytes], sig: int, own_group: bool) -> None:
    """Send ``sig`` to the command (its whole process group when it has its own)."""
    try:
        if own_group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(proc: subprocess.Popen[bytes], own_group: bool) -> None:
    """SIGTERM the command, SIGKILL it after :data:`KILL_GRACE_S` seconds, and reap it."""
    _signal_command(proc, signal.SIGTERM, own_group)
    try:
        proc.wait(KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_command(proc, signal.SIGKILL, own_group)
        proc.wait()


class StdinRecorder:
    """Copies a stream to the first run's standard input and keeps what it copied, so later
    runs read the same bytes (a stream that never ends while the run is alive is cut there)."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source = source
        self.data = bytearray()
        self.lock = threading.Lock()
        self.recorded: bytes | None = None

    def pump(self, sink: IO[bytes]) -> None:
        """Copy ``source`` into ``sink`` (a run's stdin pipe) until either end closes."""
        fd = self.source.fileno()
        try:
            while True:
                chunk = os.read(fd, 65536)
                with self.lock:
                    if self.recorded is not None:
                        return
                    self.data += chunk
                if not chunk:
                    break
                sink.write(chunk)
                sink.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.close()

    def finish(self) -> bytes:
        """The bytes the first run was given; the copying stops."""
        with self.lock:
            if self.recorded is None:
                self.recorded = bytes(self.data)
            return self.recorded


def _runnable(program: str, cwd: str | os.PathLike[str] | None) -> bool:
    """Whether ``program`` names a program: one on PATH, or a file (relative to ``cwd``)."""
    if "/" in program:
        return (Path(cwd or ".") / program).is_file()
    return shutil.which(program) is not None


def _forced_tool_call(requests: Sequence[CapturedRequest]) -> str:
    """A clause for a failed run whose last LLM request required a tool call, which the canned
    reply never makes (an agent that treats a reply without one as an error stops there);
    empty otherwise."""
    sent = [r for r in requests if r.api is not None]
    body = sent[-1].json_body if sent else None
    if not isinstance(body, dict):
        return ""
    choice = body.get("tool_choice")
    if choice == "required":
        asked = 'tool_choice "required"'
    elif isinstance(choice, dict) and choice.get("type") in ("any", "tool", "function"):
        asked = f"tool_choice {json.dumps(choice, separators=(', ', ': '))}"
    else:
        config = body.get("toolConfig")
        calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
        if not (isinstance(calling, dict) and calling.get("mode") == "ANY"):
            return ""
        asked = 'functionCallingConfig mode "ANY"'
    return (
        f"; its last request required a tool call ({asked}), and check's canned reply is a "
        'text that never calls a tool (docs/check.md, "What it cannot see")'
    )


#: what to change where a client sent LLM requests past the capture endpoint (the note of a
#: run that did, and the error of one that failed)
_PAST_ADVICE: Final = (
    "read the URL from OPENAI_BASE_URL or ANTHROPIC_BASE_URL, which check sets "
    '(docs/check.md, "What it cannot see")'
)


def _first_past(passed: Sequence[Passed]) -> str:
    """Where the first of the LLM requests sent past the capture endpoint went, its call site
    and how many other URLs the others went to: ``the first to URL, from app.py:7 in
    <module>; 1 other URL(s)``."""
    url, site = passed[0].url, passed[0].site
    where = f", from {_site_words(site)}" if site is not None else ""
    more = len({p.url for p in passed}) - 1
    also = f"; {more} other URL(s)" if more else ""
    return f"the first to {url}{where}{also}"


def _past_why(passed: Sequence[Passed], note: bool) -> str:
    """Why the first LLM request sent past the capture endpoint went there and what to change:
    a client given its own base_url, or a base-URL variable the command set over check's,
    where reading that variable (the advice for the first) is what it already does; ``note``:
    for the note of a run that succeeded, which says that they were not compared."""
    variable = passed[0].variable
    if not variable:
        tail = " is not captured, so they were not compared" if note else ""
        return f"a client given its own base_url{tail}; {_PAST_ADVICE}"
    return (
        f"the command set {variable}, which check points at its endpoint, to that URL itself "
        f"(load_dotenv(override=True) does, from a .env file)"
        f"{', so they were not compared' if note else ''}; leave check's {variable} in place "
        'while checking (load_dotenv() without override keeps it; docs/check.md, "What it '
        'cannot see")'
    )


def _went_past(passed: Sequence[Passed]) -> str:
    """A clause for a failed run that sent LLM API calls past the capture endpoint (a client
    given its own base_url, such as a local proxy's that is not running, fails on the
    connection); empty otherwise."""
    if not passed:
        return ""
    return (
        f"; it sent {len(passed)} request(s) to an LLM API route past the capture endpoint "
        f"({_first_past(passed)}), which check neither answers nor captures: "
        f"{_past_why(passed, note=False)}"
    )


def _why_not_run(program: str, exc: OSError, cwd: str | os.PathLike[str] | None) -> str:
    """Why ``program`` could not be started, and what to run instead."""
    reason = exc.strerror or str(exc)
    where = Path(cwd or ".") / program
    if not program:
        return "the command is empty; give a program, e.g. `promptcache check -- python app.py`"
    name, assigns, _ = program.partition("=")
    if exc.errno == errno.ENOENT and assigns and name.isidentifier():
        return (
            f"{reason}: {program} sets an environment variable, which only a shell reads: put "
            f"it before promptcache ({program} promptcache check -- ...) or run the command "
            f"through env (promptcache check -- env {program} ...)"
        )
    first = program.split()[0] if program.strip() else ""
    if exc.errno == errno.ENOENT and first != program and _runnable(first, cwd):
        return (
            f"{reason}: the command is one word holding spaces; give the program and each "
            f"argument as words of their own: promptcache check -- {program.strip()}"
        )
    if exc.errno == errno.ENOENT and "/" not in program and where.is_file():
        interpreter = "python" if program.endswith(".py") else "sh"
        return (
            f"{reason}: no program on PATH is named {program}; the file of that name in this "
            f"folder is run through its interpreter ({interpreter} {program}) or by its path "
            f"(./{program})"
        )
    if exc.errno == errno.ENOENT and "/" not in program:
        return (
            f"{reason}: no such program on PATH (a shell builtin or alias needs a shell: "
            f"sh -c '...')"
        )
    if exc.errno == errno.EACCES and where.is_dir():
        return f"{reason}: it is a folder, not a program"
    if exc.errno == errno.EACCES and where.is_file() and not os.access(where, os.X_OK):
        return (
            f"{reason}: the file is not executable; run it through its interpreter "
            f"(python {program}, sh {program}) or make it executable (chmod +x {program})"
        )
    if exc.errno == errno.ENOEXEC:
        return (
            f"{reason}: the file has no #! line naming its interpreter; run it through one "
            f"(python {program}, sh {program})"
        )
    return reason


def _run_command(
    command: Sequence[str],
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None,
    out: IO[Any],
    stdin: bytes | StdinRecorder | None,
    timeout: float | None,
) -> int | None:
    """Run the command once; its exit status, or None when it ran past ``timeout`` seconds
    (it is then stopped, with its process group when it has one).

    With ``stdin`` (bytes, or a recorder that copies a stream) the command reads it on its
    standard input and runs in a process group of its own (so a timeout stops its
    subprocesses too); without, it shares our standard input and process group (a terminal's
    Ctrl-C reaches it, it can read the terminal).

    Raises:
        OSError: the command could not start.
    """
    own_group = stdin is not None
    proc: subprocess.Popen[bytes] | None = None
    deferred = _DeferredStops()
    try:
        try:
            proc = subprocess.Popen(
                list(command),
                env=dict(env),
                cwd=cwd,
                stdout=out,
                stdin=subprocess.PIPE if stdin is not None else None,
                start_new_session=own_group,
            )
        finally:
            deferred.replay()  # a Ctrl-C or SIGTERM that came while it started, raised here
        if isinstance(stdin, StdinRecorder):
            assert proc.stdin is not None
            threading.Thread(target=stdin.pump, args=(proc.stdin,), daemon=True).start()
            proc.wait(timeout)
        else:
            proc.communicate(stdin, timeout=timeout)
    except BaseException as exc:  # a timeout, or Ctrl-C or SIGTERM of check: stop the command
        if proc is not None:
            _stop(proc, own_group)
        if isinstance(exc, subprocess.TimeoutExpired):
            return None
        raise
    return proc.returncode


class _DeferredStops:
    """Holds back SIGINT and SIGTERM while a command starts, then raises what came.

    ``subprocess.Popen`` returns only once the command has started, and an exception raised
    inside it (a Ctrl-C while it waits for the ``exec``) leaves the started command running
    with no ``Popen`` to stop it. Created in the main thread, this records those signals
    instead of acting on them; :meth:`replay` puts the handlers back and calls the one that
    was due (Python's SIGINT handler raises ``KeyboardInterrupt``, check's SIGTERM handler
    :class:`CheckTerminatedError`), where the caller can stop the command. Elsewhere (a
    thread cannot set handlers) it does nothing.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.came: list[int] = []
        self.previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self.previous[sig] = signal.signal(sig, self._record)

    def _record(self, signum: int, frame: Any) -> None:
        self.came.append(signum)

    def replay(self) -> None:
        """Put the handlers back, then act on the first signal that came, if any."""
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        if not self.came:
            return
        sig = self.came[0]
        handler = self.previous.get(sig)
        if callable(handler):
            handler(sig, None)
        elif handler == signal.SIG_DFL:  # its default action: end this process
            os.kill(os.getpid(), sig)


def run_check(
    command: Sequence[str],
    *,
    runs: int = 2,
    isolate: bool = False,
    forward: bool = False,
    upstreams: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: IO[Any] | None = None,
    minimums: ModelMinimums | None = None,
    timeout: float | None = None,
    stdin: bytes | IO[bytes] | None = None,
    names: CommandNames | None = None,
) -> CheckResult:
    """Run ``command`` once per perturbation (``plan_runs``) and compare the runs.

    Args:
        command: the program and its arguments.
        runs: runs in all, baseline included (``--runs``).
        isolate: one perturbation kind per run (``--isolate``).
        forward: send requests on to the real upstream (``--forward``).
        upstreams: mount -> base URL for ``forward`` (default: the environment's
            ``*_BASE_URL`` variables, else the vendors' public APIs).
        env: the environment to start from (default ``os.environ``).
        cwd: the folder to run in.
        stdout: where the program's stdout goes (default: ours).
        minimums: the minimum-cacheable-prefix table (default: the bundled one).
        timeout: seconds each run may take before it is stopped (``--timeout``; None: no
            limit).
        stdin: what every run reads on its standard input: bytes, or a binary stream copied
            to the first run and recorded, the later runs reading what the first was given;
            None: the runs share our standard input.
        names: how the errors name the command, its timeout option and its exit statuses
            (default: ``promptcache check``'s; the pytest plugin names its session).

    Raises:
        ConfigError: ``command`` is empty, ``runs`` below 2 or ``timeout`` not positive.
        CommandFailedError: the command could not start or exited non-zero in a run.
        CommandTimeoutError: a run took longer than ``timeout`` seconds.
        CheckTerminatedError: we got SIGTERM (the running command is stopped first).
    """
    if not command:
        raise ConfigError("no COMMAND given: use `promptcache check -- python app.py`")
    if timeout is not None and not timeout > 0:
        raise ConfigError(f"--timeout must be a positive number of seconds, not {timeout}")
    base_env = dict(os.environ if env is None else env)
    plans = plan_runs(runs, isolate=isolate, start=time.time())
    not_user = _not_user_dirs()
    out = stdout if stdout is not None else sys.stdout
    if forward and upstreams is None:
        from .forward import default_upstreams

        upstreams = default_upstreams(base_env)
    given: bytes | StdinRecorder | None = (
        stdin if stdin is None or isinstance(stdin, bytes) else StdinRecorder(stdin)
    )
    # SIGTERM becomes an exception, so the running command is stopped rather than orphaned
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if in_main else None
    try:
        results = _run_all(
            command,
            plans,
            forward,
            upstreams,
            base_env,
            not_user,
            cwd,
            out,
            given,
            timeout,
            names or CommandNames(),
        )
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    findings, notes = analyse(results, minimums, forwarded=forward)
    return CheckResult(list(command), results, findings, notes)


def _read_passed(log: str, run: int) -> list[Passed]:
    """The calls of ``run`` that the hook wrote to ``log`` as sent past the endpoint."""
    out: list[Passed] = []
    try:
        with open(log, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a process that died while writing
                if isinstance(entry, dict) and entry.get("run") == run:
                    site = CallSite.parse(entry.get("site"))
                    variable = entry.get("variable")
                    variable = variable if isinstance(variable, str) else ""
                    out.append(Passed(str(entry.get("url")), site, variable))
    except FileNotFoundError:
        pass
    return out


def _run_all(
    command: Sequence[str],
    plans: Sequence[Perturbation],
    forward: bool,
    upstreams: Mapping[str, str] | None,
    base_env: Mapping[str, str],
    not_user: Sequence[str],
    cwd: str | os.PathLike[str] | None,
    out: IO[Any],
    given: bytes | StdinRecorder | None,
    timeout: float | None,
    names: CommandNames,
) -> list[RunResult]:
    """Every run of ``run_check``, in order (see there for the errors raised)."""
    results: list[RunResult] = []
    with (
        CaptureServer(forward=forward, upstreams=upstreams) as server,
        tempfile.TemporaryDirectory(prefix="promptcache-check-") as scratch,
    ):
        passed_log = os.path.join(scratch, "passed.jsonl")
        for plan in plans:
            server.current_run = plan.run
            child_env = _child_env(base_env, plan, server, not_user, passed_log)
            out.flush()
            started = time.perf_counter()
            try:
                status = _run_command(command, child_env, cwd, out, given, timeout)
            except OSError as exc:
                raise CommandFailedError(
                    f"cannot run {command[0]!r}: {_why_not_run(command[0], exc, cwd)}"
                ) from None
            finally:
                if isinstance(given, StdinRecorder):
                    given = given.finish()
            duration = time.perf_counter() - started
            result = RunResult(
                plan,
                status or 0,
                duration,
                server.requests(plan.run),
                _read_passed(passed_log, plan.run),
            )
            # said from what the run's requests report, so a clock it could not move is not
            # quoted as moved
            what = result.describe().partition(": ")[2]
            subject = names.subject
            past = _went_past(result.passed)
            if status is None:
                raise CommandTimeoutError(
                    f"{subject} ran past {names.timeout_option} {timeout:g} s in run {plan.run} "
                    f"({what}) and was stopped; any output it printed is above{past}"
                )
            if status < 0:
                raise CommandFailedError(
                    f"{subject} was killed by {signal.Signals(-status).name} in run "
                    f"{plan.run} ({what}); any output it printed is above{past}"
                )
            if status != 0:
                meaning = names.statuses.get(status)
                said = f" ({meaning})" if meaning else ""
                forced = "" if forward else _forced_tool_call(result.requests)
                raise CommandFailedError(
                    f"{subject} exited with status {status}{said} in run {plan.run} ({what}); "
                    f"any output it printed is above{forced}{past}"
                )
            results.append(result)
    return results
