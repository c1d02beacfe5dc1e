"""``promptcache check``: run COMMAND perturbed and report what breaks its cached prefix."""

from __future__ import annotations

import sys
from pathlib import Path

import click

FORMATS = ("text", "json", "sarif", "github")


@click.command(
    name="check",
    # everything from COMMAND on is COMMAND's, options included (`-- ` is then optional)
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
# not required=True: run_check's one-line error says how to write COMMAND
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--runs",
    type=click.IntRange(min=2),
    default=2,
    show_default=True,
    help="Runs in all, the baseline included; each later run has its own perturbation.",
)
@click.option(
    "--isolate",
    is_flag=True,
    help="Give each perturbation kind runs of its own, so every finding names one cause.",
)
@click.option(
    "--forward",
    is_flag=True,
    help="Send requests on to the real upstream (the *_BASE_URL variables, else the vendors' "
    "APIs) instead of answering them with canned responses.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop a run that takes longer than this and fail the check (exit 2); default: no limit.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="Report format: text, JSON, SARIF 2.1.0 (at the call site) or GitHub annotations.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write the report to this file instead of stdout ('-': stdout).",
)
def check(
    command: tuple[str, ...],
    runs: int,
    isolate: bool,
    forward: bool,
    timeout: float | None,
    output_format: str,
    output: Path | None,
) -> None:
    """Run COMMAND once as a baseline and again with the clock, PYTHONHASHSEED, random, uuid4,
    secrets, directory-listing order and process id changed; report every LLM request whose
    cacheable prefix differs, and every request that breaks a breakpoint rule.

    Write it as `promptcache check [OPTIONS] -- COMMAND [ARGS]...`, e.g.
    `promptcache check -- python -m myapp.smoke`.

    Standard input that is not a terminal is given to the first run and recorded; every
    later run reads the same bytes.

    Exit status: 0 clean, 1 findings, 2 when COMMAND failed or ran past --timeout (its output
    is shown) or on bad input.
    """
    from promptcache.check.output import cannot_write, named_by_command, render, summary
    from promptcache.check.runner import PYTEST_STATUSES, CommandNames, run_check, runs_pytest
    from promptcache.errors import ConfigError
    from promptcache.folders import PYTHON_NAME, folder_problem, is_python_source

    if output is not None and str(output) == "-":
        output = None  # '-' is stdout, as for the commands that read '-' as stdin
    if not command:
        raise ConfigError("no COMMAND given: use `promptcache check -- python app.py`")
    if command[0].startswith("-"):
        # An option click does not know lands here as the "command" (no program is named
        # `-x`): say so rather than failing to run it.
        import difflib

        # compared without their dashes, which every long option shares: with them,
        # '--bogus' came close enough to '--runs'
        known = {
            o.lstrip("-"): o
            for p in click.get_current_context().command.params
            for o in p.opts
            if o.startswith("--")
        }
        typed = command[0].split("=")[0].lstrip("-")
        near = difflib.get_close_matches(typed, list(known), n=1)
        hint = f" (did you mean {known[near[0]]}?)" if near else ""
        raise ConfigError(
            f"no such option {command[0]}{hint} for `promptcache check`; see "
            "`promptcache check --help`, and write the command after `--`: "
            "`promptcache check [OPTIONS] -- python app.py`"
        )
    problem = folder_problem(output) if output is not None else None
    if problem:
        raise ConfigError(f"cannot write --output {output}: {problem}")
    if output is not None and named_by_command(output, command):
        raise ConfigError(
            f"cannot write --output {output}: the command names that file; the report would "
            "replace it: pick another file"
        )
    if output is not None and is_python_source(output):
        raise ConfigError(f"cannot write --output {output}: {PYTHON_NAME}")
    why = cannot_write(output) if output is not None else None
    if why is not None:  # said now, not after the runs
        raise ConfigError(f"cannot write --output {output}: {why}")
    # Piped input is recorded as the first run reads it, and every later run reads the same
    # bytes (they would otherwise read nothing).
    stdin = None if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer
    # A machine-readable report on stdout keeps stdout for itself: the program's goes to stderr.
    program_out = sys.stderr if output is None and output_format in ("json", "sarif") else None
    result = run_check(
        list(command),
        runs=runs,
        isolate=isolate,
        forward=forward,
        stdout=program_out,
        timeout=timeout,
        stdin=stdin,
        names=CommandNames(statuses=PYTEST_STATUSES) if runs_pytest(command) else None,
    )
    text = render(result, output_format)
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write --output {output}: {exc.strerror or exc}") from None
        # the report is in the file: one line says what it holds, so that a job failing with
        # status 1 says why in its log
        click.echo(f"{summary(result)}; report written to {output}", err=True)
    else:
        if program_out is None and text:
            # The program's output came first on this stdout and need not end in a newline:
            # a blank line keeps the report's first line (a `::error` command too) off it.
            click.echo()
        click.echo(text, nl=False)
    sys.exit(result.exit_code)
