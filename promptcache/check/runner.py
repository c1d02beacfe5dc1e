"""Run COMMAND once per perturbation against the capture endpoint, then compare the runs.

The runs are sequential: each costs the program's own time plus the capture overhead
(``benchmarks/check_overhead.py``). The program's output passes through (its stdout to
``stdout``, its stderr to ours). A run that exits non-zero stops the check:
:class:`CommandFailedError` names the run and its status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from promptcache.errors import ConfigError, PromptCacheError
from promptcache.fingerprint import fingerprint_request
from promptcache.minimums import ModelMinimums, default_model_minimums

from .capture import CapturedRequest, CaptureServer
from .findings import Finding
from .pairing import Sent, compare_runs
from .perturbation import Perturbation, plan_runs
from .structure import structure_findings

__all__ = ["CheckResult", "CommandFailedError", "RunResult", "run_check"]

#: Dummy keys set where the environment has none, so clients start without a real key.
DUMMY_KEYS: dict[str, str] = {
    "ANTHROPIC_API_KEY": "sk-ant-promptcache-check",
    "OPENAI_API_KEY": "sk-promptcache-check",
    "GEMINI_API_KEY": "promptcache-check",
}


class CommandFailedError(PromptCacheError):
    """COMMAND exited non-zero (or could not start) in one of the runs."""


@dataclass
class RunResult:
    """One run of COMMAND.

    Attributes:
        perturbation: what it changed.
        exit_status: the command's exit status.
        duration_s: wall time of the run, seconds.
        requests: every request the endpoint received during it, in arrival order.
    """

    perturbation: Perturbation
    exit_status: int
    duration_s: float
    requests: list[CapturedRequest] = field(default_factory=list)


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


def _child_env(
    base: Mapping[str, str], run: Perturbation, server: CaptureServer, not_user: Sequence[str]
) -> dict[str, str]:
    env = run.env(base, server.origin, not_user)
    env.update(server.base_urls())
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
        if key in merged:
            merged[key] = replace(merged[key], requests=merged[key].requests + 1)
        else:
            merged[key] = finding
    return list(merged.values())


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
        unhooked = sum(1 for r in run.requests if not r.hooked)
        if unhooked:
            notes.append(
                f"run {run.perturbation.run}: {unhooked} request(s) came without the in-process "
                "hook (not a Python process, or python -I/-S): no call site, and the clock, "
                "random, listing and pid changes did not apply to them"
            )
    if not readable[0]:
        notes.append(
            "no LLM request was captured in run 0, so nothing was compared: the command sent "
            "none to the capture endpoint (see docs/check.md, what check cannot see)"
        )
    findings = structure_findings(readable[0], minimums)
    for run, sents in zip(runs[1:], readable[1:], strict=True):
        clocks = [runs[0].perturbation.clock, run.perturbation.clock]
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
        if report.no_breakpoint:
            notes.append(
                f"run {run.perturbation.run}: {report.no_breakpoint} request pair(s) differ in "
                "Anthropic/Bedrock requests that carry no cache breakpoint (those APIs cache "
                "nothing unasked); not reported"
            )
    merged = _merge(findings)
    merged.sort(
        key=lambda f: (
            f.site is None,
            f.site.path if f.site else "",
            f.site.line if f.site else 0,
            f.rule,
        )
    )
    return merged, notes


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

    Raises:
        ConfigError: ``command`` is empty or ``runs`` below 2.
        CommandFailedError: the command could not start or exited non-zero in a run.
    """
    if not command:
        raise ConfigError("no COMMAND given: use `promptcache check -- python app.py`")
    base_env = dict(os.environ if env is None else env)
    plans = plan_runs(runs, isolate=isolate, start=time.time())
    not_user = _not_user_dirs()
    results: list[RunResult] = []
    out = stdout if stdout is not None else sys.stdout
    if forward and upstreams is None:
        from .forward import default_upstreams

        upstreams = default_upstreams(base_env)
    with CaptureServer(forward=forward, upstreams=upstreams) as server:
        for plan in plans:
            server.current_run = plan.run
            child_env = _child_env(base_env, plan, server, not_user)
            out.flush()
            started = time.perf_counter()
            try:
                proc = subprocess.run(
                    list(command), env=child_env, cwd=cwd, stdout=out, check=False
                )
            except OSError as exc:
                raise CommandFailedError(
                    f"cannot run {command[0]!r}: {exc.strerror or exc}"
                ) from None
            duration = time.perf_counter() - started
            if proc.returncode != 0:
                raise CommandFailedError(
                    f"the command exited with status {proc.returncode} in run {plan.run} "
                    f"({plan.describe().partition(': ')[2]}); its output is above"
                )
            results.append(RunResult(plan, proc.returncode, duration, server.requests(plan.run)))
    findings, notes = analyse(results, minimums, forwarded=forward)
    return CheckResult(list(command), results, findings, notes)
