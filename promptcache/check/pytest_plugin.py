"""``pytest --promptcache-check``: run the same pytest session under ``promptcache check``.

Registered through the ``pytest11`` entry point, so every pytest loads it; it does nothing
unless ``--promptcache-check`` is given. Then, instead of running the tests itself, pytest runs
``python -m pytest`` with the same arguments (minus this plugin's options) as the checked
COMMAND: once as a baseline and again per perturbation, each run's test output passing through,
and prints the check's report. The session's exit status is the check's: 0 clean, 1 findings,
2 when the test run itself failed (in either run).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_OPTIONS = {
    "--promptcache-check": False,
    "--promptcache-check-runs": True,
    "--promptcache-check-isolate": False,
    "--promptcache-check-format": True,
    "--promptcache-check-output": True,
    "--promptcache-check-timeout": True,
}
_FORMATS = ("text", "json", "sarif", "github")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("promptcache", "promptcache check")
    group.addoption(
        "--promptcache-check",
        action="store_true",
        default=False,
        help="run this session under `promptcache check`: twice, perturbed, and report the LLM "
        "requests whose cacheable prefix differs",
    )
    # the values are read in pytest_cmdline_main, not by argparse (type=, choices=): a value
    # argparse refuses is pytest's usage error, exit 4, where check's bad input is exit 2
    group.addoption(
        "--promptcache-check-runs",
        default="2",
        help="runs in all, the baseline included (default 2)",
    )
    group.addoption(
        "--promptcache-check-isolate",
        action="store_true",
        default=False,
        help="one perturbation kind per run",
    )
    group.addoption(
        "--promptcache-check-format",
        default="text",
        help="report format: " + ", ".join(_FORMATS) + " (default text)",
    )
    group.addoption(
        "--promptcache-check-output",
        default=None,
        help="write the report to this file ('-': stdout)",
    )
    group.addoption(
        "--promptcache-check-timeout",
        default=None,
        metavar="SECONDS",
        help="stop a run that takes longer than this and fail the check (exit 2)",
    )


def _child_args(args: tuple[str, ...] | list[str]) -> list[str]:
    """The session's arguments without this plugin's options."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name, eq, _ = arg.partition("=")
        if name in _OPTIONS:
            skip = _OPTIONS[name] and not eq
            continue
        out.append(arg)
    return out


def _given_without_check(args: tuple[str, ...] | list[str]) -> str | None:
    """The first of this plugin's other options on the command line, when
    ``--promptcache-check`` itself is not there (options in ``addopts`` are not looked at)."""
    names = [arg.partition("=")[0] for arg in args]
    if "--promptcache-check" in names:
        return None
    return next((name for name in names if name in _OPTIONS), None)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.getoption("promptcache_check"):
        stray = _given_without_check(list(config.invocation_params.args))
        if stray is not None:
            sys.stderr.write(
                f"error: {stray} does nothing without --promptcache-check; add "
                "--promptcache-check to run the session under promptcache check, or drop "
                f"{stray}\n"
            )
            return 2
        return None
    import os

    from promptcache.check.child import PLAN_ENV

    if os.environ.get(PLAN_ENV):
        # this session is one of a check's runs (`--promptcache-check` in addopts, which the
        # runs read too, or `promptcache check -- pytest --promptcache-check`): it runs the
        # tests; checking it again would start runs of runs, without end
        return None
    from promptcache.check.output import cannot_write, named_by_command, render, summary
    from promptcache.check.runner import PYTEST_STATUSES, CommandNames, run_check
    from promptcache.errors import PromptCacheError
    from promptcache.folders import PYTHON_NAME, folder_problem, is_python_source

    command = [sys.executable, "-m", "pytest", *_child_args(list(config.invocation_params.args))]
    output = config.getoption("promptcache_check_output")
    if output == "-":
        output = None  # '-' is stdout, as for `promptcache check -o -`
    output_format = config.getoption("promptcache_check_format")
    # bad options are said before the session runs, in the names given on this command line
    if output_format not in _FORMATS:
        sys.stderr.write(
            f"error: --promptcache-check-format must be one of {', '.join(_FORMATS)}, got "
            f"{output_format!r}\n"
        )
        return 2
    runs_given = str(config.getoption("promptcache_check_runs"))
    try:
        runs = int(runs_given)
    except ValueError:
        sys.stderr.write(
            f"error: --promptcache-check-runs must be a whole number, at least 2, got "
            f"{runs_given!r}\n"
        )
        return 2
    if runs < 2:
        sys.stderr.write(
            "error: --promptcache-check-runs must be at least 2 (a baseline and one perturbed "
            f"run), got {runs}\n"
        )
        return 2
    timeout_given = config.getoption("promptcache_check_timeout")
    try:
        timeout = None if timeout_given is None else float(timeout_given)
    except ValueError:
        sys.stderr.write(
            "error: --promptcache-check-timeout must be a positive number of seconds, got "
            f"{timeout_given!r}\n"
        )
        return 2
    if timeout is not None and not timeout > 0:
        sys.stderr.write(
            "error: --promptcache-check-timeout must be a positive number of seconds, got "
            f"{timeout:g}\n"
        )
        return 2
    problem = folder_problem(output) if output else None
    if problem:
        sys.stderr.write(f"error: cannot write --promptcache-check-output {output}: {problem}\n")
        return 2
    if output and named_by_command(output, command):
        sys.stderr.write(
            f"error: cannot write --promptcache-check-output {output}: the session names that "
            "file; the report would replace it: pick another file\n"
        )
        return 2
    if output and is_python_source(output):
        sys.stderr.write(
            f"error: cannot write --promptcache-check-output {output}: {PYTHON_NAME}\n"
        )
        return 2
    why = cannot_write(output) if output else None
    if why is not None:  # said now, not after the sessions
        sys.stderr.write(f"error: cannot write --promptcache-check-output {output}: {why}\n")
        return 2
    session_names = CommandNames("the test session", "--promptcache-check-timeout", PYTEST_STATUSES)
    try:
        result = run_check(
            command,
            runs=runs,
            isolate=config.getoption("promptcache_check_isolate"),
            cwd=str(config.invocation_params.dir),
            timeout=timeout,
            names=session_names,
            # as `promptcache check`: a JSON or SARIF report on stdout keeps stdout for itself,
            # the sessions' own output goes to stderr
            stdout=sys.stderr if not output and output_format in ("json", "sarif") else None,
        )
    except PromptCacheError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    text = render(result, output_format)
    if output:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            sys.stderr.write(
                f"error: cannot write --promptcache-check-output {output}: {exc.strerror or exc}\n"
            )
            return 2
        sys.stderr.write(f"{summary(result)}; report written to {output}\n")
    else:
        sys.stdout.write(text)
    return result.exit_code
