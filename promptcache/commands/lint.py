"""``promptcache lint``: find code that silently breaks prompt caching (for CI and pre-commit)."""

from __future__ import annotations

import contextlib
import difflib
import errno
import os
import re
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from promptcache.folders import PYTHON_NAME, folder_problem, is_python_source
from promptcache.formatting import plural

FORMATS = ("text", "json", "sarif", "github")
FAIL_ON = ("error", "warning", "info", "never")


def _codes(value: str | None) -> list[str]:
    return [c.strip().upper() for c in (value or "").split(",") if c.strip()]


def _rule_codes(value: str) -> frozenset[str]:
    """The codes a --select or --ignore names; ALL is every rule, as in the config (and ruff)."""
    from promptcache.lint_rules.registry import KNOWN_CODES, get_rule

    codes = _codes(value)
    # every code is checked, also beside ALL (as the config's): ALL,PC999 is an error
    named = frozenset(get_rule(c).code for c in codes if c != "ALL")
    return KNOWN_CODES if "ALL" in codes else named


def _existing_paths(
    ctx: click.Context, param: click.Parameter, paths: tuple[Path, ...]
) -> tuple[Path, ...]:
    """``paths`` if each names something to lint; else a usage error that says what is wrong,
    a symbolic link loop or a link to nothing included (click's own check calls both "does
    not exist")."""
    for path in paths:
        try:
            path.stat()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                why = "is a symbolic link loop (following it never reaches a file)"
            elif path.is_symlink():
                why = f"is a symbolic link to {os.readlink(path)!r}, which does not exist"
            elif exc.errno == errno.ENOENT and str(path) == "-":
                why = "does not exist (source is not read from stdin: name files or folders)"
            elif exc.errno == errno.ENOENT and any(c in str(path) for c in "*?["):
                # quoted in a CI step's YAML or a script, a glob reaches us unexpanded
                why = (
                    "does not exist (a glob pattern is not expanded here: name the folder, "
                    "which is searched for .py files, or let the shell expand it unquoted)"
                )
            elif exc.errno == errno.ENOENT:
                why = "does not exist"
            else:
                why = f"cannot be read: {exc.strerror or exc}"
            raise click.BadParameter(f"Path {str(path)!r} {why}.", ctx, param) from None
        kind = _special_kind(path)
        if kind is not None:  # a walk leaves such a file out; named, it would vanish unsaid
            raise click.BadParameter(
                f"Path {str(path)!r} is {kind}, not a file or folder: name a Python file or a "
                "folder that holds some.",
                ctx,
                param,
            )
    return paths


PYTHON_SUFFIXES = (".py", ".pyi", ".pyw")


def _python_source(path: Path) -> bool:
    """Whether a file named on the command line is Python source: it ends in .py, .pyi or .pyw
    (any case), or it has no extension and its first line is a ``#!`` naming python (a script,
    as pre-commit's ``types: [python]`` names it). A script that cannot be read is kept, so
    the run reports it (PC000) rather than leave it out unsaid."""
    if path.suffix.lower() in PYTHON_SUFFIXES:
        return True
    if path.suffix:
        return False
    try:
        with path.open("rb") as handle:
            first = handle.readline(256)
    except OSError:
        return True
    return first.startswith(b"#!") and b"python" in first


def _unused_configs(paths: list[Path], used: Path | None) -> list[Path]:
    """The pyproject.toml files with a [tool.promptcache.lint] table that are nearer to a
    named folder or file (its own, or one above it) than ``used``, the one found from the
    current folder: a folder linted from outside its project runs on other settings.

    Each folder is looked at once, and a pyproject.toml is parsed only where there is one (as
    pre-commit names every staged file); one that cannot be read is left to the run that
    uses it."""
    import tomllib

    from promptcache.errors import ConfigError
    from promptcache.lint_rules.config import lint_table

    stop = used.resolve().parent if used is not None else None
    seen: set[Path] = set()
    unused: dict[Path, None] = {}
    for named in paths:
        folder = (named if named.is_dir() else named.parent).resolve()
        while folder not in seen and folder != stop:
            seen.add(folder)
            candidate = folder / "pyproject.toml"
            if candidate.is_file():
                try:
                    data = tomllib.loads(candidate.read_text(encoding="utf-8"))
                    has_table = lint_table(data, candidate) is not None
                except (OSError, ValueError, RecursionError, ConfigError):
                    has_table = False
                if has_table:
                    unused[Path(os.path.relpath(candidate))] = None
                    break
            if folder.parent == folder:
                break
            folder = folder.parent
    return list(unused)


def _special_kind(path: Path) -> str | None:
    """What ``path`` (followed through links) is when it is neither a regular file nor a
    folder (reading a FIFO or a device could block for ever or never end); None otherwise."""
    mode = path.stat().st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


@click.command(name="lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path), callback=_existing_paths)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="Report format: ruff-like text, JSON, SARIF 2.1.0 or GitHub annotations.",
)
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON),
    default="error",
    show_default=True,
    help="Exit 1 when a finding is at least this severe ('never': always exit 0).",
)
@click.option(
    "--select",
    help="Comma-separated rule codes to run, or ALL (replaces the config's select and ignore, "
    "as ruff's).",
)
@click.option("--ignore", help="Comma-separated rule codes to skip, or ALL (added to the config).")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="pyproject.toml to read [tool.promptcache.lint] from (default: the nearest one).",
)
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply the config's exclude to files named on the command line, and leave out those "
    "a folder's walk leaves out (test files unless --include-tests, hidden and build folders) "
    "(for pre-commit).",
)
@click.option(
    "--include-tests",
    is_flag=True,
    help="Also lint test folders (tests/, test/, testing/) and test_*.py, *_test.py and "
    "conftest.py files found inside the given folders.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Also print, on stderr, the unproven flows: chains through a call the analysis "
    "cannot see, which are not findings.",
)
@click.option("--fix", is_flag=True, help="Apply the safe autofixes (PC003, PC004, PC005, PC014).")
@click.option(
    "--diff",
    is_flag=True,
    help="Print the autofixes as a patch and nothing else (no report); write nothing (even "
    "with --fix); exit 1 only when there is a patch, whatever the findings (as ruff's).",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    help="Worker processes (default: one per CPU; small runs stay in one process).",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Analyse every file afresh; neither read nor write the cache.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="PROMPTCACHE_CACHE_DIR",
    help="Where cached results live (default: .promptcache_cache beside the pyproject.toml "
    "the settings come from, else in the current folder; env PROMPTCACHE_CACHE_DIR).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report (with --diff: the patch) to this file instead of stdout ('-': stdout); "
    "the report's summary line (with --diff: what the patch fixes) goes to stderr.",
)
def lint(
    paths: tuple[Path, ...],
    output_format: str,
    fail_on: str,
    select: str | None,
    ignore: str | None,
    config_path: Path | None,
    force_exclude: bool,
    include_tests: bool,
    explain: bool,
    fix: bool,
    diff: bool,
    jobs: int | None,
    no_cache: bool,
    cache_dir: Path | None,
    output: Path | None,
) -> None:
    """Lint Python files for code that breaks LLM prompt caching.

    Exit status: 0 clean, 1 findings at or above --fail-on (with --diff: a patch printed),
    2 usage or config error.
    Settings come from [tool.promptcache.lint] in pyproject.toml; silence one line with
    `# promptcache: ignore[PC001]`.

    \b
    Example:
        promptcache lint src/
        promptcache lint . --format sarif -o promptcache.sarif
        promptcache lint app.py --diff
    """
    from dataclasses import replace

    from promptcache.errors import UnknownRuleError

    if output is not None and str(output) == "-":
        output = None  # '-' is stdout, as for the commands that read '-' as stdin
    if output is not None:  # before the analysis, which can take minutes on a large tree
        if is_python_source(output):
            # a test file the default scope leaves out, a module not named: source all the same
            raise click.BadParameter(f"{output}: {PYTHON_NAME}", param_hint="'--output'")
        why = _output_unwritable(output)
        if why is not None:
            raise click.BadParameter(f"cannot write {output}: {why}", param_hint="'--output'")
    for option, codes in (("--select", select), ("--ignore", ignore)):
        if codes is not None and not _codes(codes):
            # an empty --select would read as "no restriction" (every rule), an empty
            # --ignore as a list given by mistake: both are a slip
            raise click.BadParameter(
                f"{codes!r} names no rule code; give codes such as PC001,PC005, or leave "
                f"{option} out to {'run every rule' if option == '--select' else 'skip none'}",
                param_hint=f"'{option}'",
            )
    from promptcache.lint_rules import config as lint_config
    from promptcache.lint_rules import output as render
    from promptcache.lint_rules.registry import KNOWN_CODES
    from promptcache.lint_rules.runner import lint_paths

    found = config_path or lint_config.find_pyproject(Path.cwd())
    config = lint_config.load_config(found, KNOWN_CODES, named=config_path is not None)
    if config_path is None:
        for unused in _unused_configs(list(paths), found):
            click.echo(
                f"warning: {unused} has a [tool.promptcache.lint] table that this run does not "
                "use: settings come from the nearest pyproject.toml at or above the current "
                f"folder ({os.path.relpath(found) if found is not None else 'none: the defaults'}"
                f"); run from "
                f"{unused.parent} or pass --config {unused}",
                err=True,
            )
    if select is not None:
        # as ruff's --select: the codes named here run even where the config ignores them
        # (per-file-ignores and suppression comments still apply)
        config = replace(config, select=_rule_codes(select), ignore=frozenset())
    if ignore is not None:
        config = replace(config, ignore=config.ignore | _rule_codes(ignore))
    if not config.enabled(KNOWN_CODES):  # what follows would read as a clean run
        click.echo(
            "warning: no rule is enabled (the select and ignore of the command line and the "
            "config leave none), so nothing is checked",
            err=True,
        )
    targets = list(paths) or [Path(".")]
    # A notebook named on the command line is JSON, which parses as one Python dict display:
    # it would be 'All checks passed' with none of its cells read. Say so, and leave it out.
    notebooks = [t for t in targets if t.suffix.lower() == ".ipynb" and t.is_file()]
    for notebook in notebooks:
        click.echo(
            f"warning: skipped {notebook}: a Jupyter notebook is JSON, and its cells are not "
            f"linted; export them (jupyter nbconvert --to script {notebook}) and lint the .py",
            err=True,
        )
    targets = [t for t in targets if t not in notebooks]
    # Any other file named that is not Python (README.md, data.json from `git ls-files`) would
    # be parsed as Python: a PC000 line, or a JSON dict that passes. Say so, and leave it out.
    others = [t for t in targets if t.is_file() and not _python_source(t)]
    if others:
        names = ", ".join(str(t) for t in others[:5])
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        click.echo(
            f"warning: skipped {plural(len(others), 'named file')} that "
            f"{'is' if len(others) == 1 else 'are'} not Python source ({names}{more}): a named "
            "file is linted when it ends in .py, .pyi or .pyw, or has no extension and a #! line "
            "naming python",
            err=True,
        )
        targets = [t for t in targets if t not in others]
    from promptcache.lint_rules.analysis.cache import DEFAULT_DIR

    cache = None if no_cache else (cache_dir or config.root / DEFAULT_DIR)
    if cache is not None:
        why = _unwritable(cache)
        if why is not None:  # the cache would drop every write: say so, and leave it out
            click.echo(f"warning: lint cache off: cannot write to {cache} ({why})", err=True)
            cache = None
    results = lint_paths(targets, config, jobs, force_exclude, cache, include_tests)
    if output is not None and os.path.realpath(output) in {
        os.path.realpath(r.path) for r in results
    }:  # the report (or patch) would replace the source it is about
        raise click.BadParameter(
            f"{output} is one of the files being linted; writing the report there would "
            "replace its source: pick another file",
            param_hint="'--output'",
        )
    templates = sum(1 for r in results if r.skipped == "template")
    if templates:
        click.echo(
            f"skipped {plural(templates, 'template file')} "
            "(.py files whose syntax error is a {{ }} or {% %} placeholder)",
            err=True,
        )
    errors = [e for r in results for e in r.errors]
    if errors:
        raise UnknownRuleError("bad suppression comment(s):\n  " + "\n  ".join(errors))
    if not results:
        click.echo(_nothing_to_lint(targets, config, force_exclude, include_tests), err=True)
    unwritten = 0
    if diff:  # --diff never writes a source file, with or without --fix (as ruff)
        _apply_fixes(results, config, write=False, show_diff=True, output=output)
        return
    if fix:
        results, unwritten = _apply_fixes(results, config, write=True, show_diff=False)
        # what is left, as one program again: a fix in one module can change another's findings
        results = lint_paths(targets, config, jobs, force_exclude, cache, include_tests)
    report = ""  # the text report: printed, or summed up in one line beside --output's file
    if output_format == "text" or output is not None:
        if config.enabled(KNOWN_CODES):
            report = render.render_text(results)
        else:  # "All checks passed" would be said of a run that checked nothing
            files = sum(1 for r in results if not r.skipped)
            report = f"Nothing checked: no rule is enabled ({plural(files, 'file')})\n"
    if output_format == "sarif":
        from promptcache.lint_rules.sarif import render_sarif

        text = render_sarif(results)
    elif output_format == "json":
        text = render.render_json(results)
    elif output_format == "github":
        text = render.render_github(results)
    else:
        text = report
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise click.BadParameter(
                f"cannot write {output}: {why}", param_hint="'--output'"
            ) from exc
        # the text report's last line, so a CI log that fails on the exit status says why
        summary = report.strip().rsplit("\n", 1)[-1].removesuffix(".")
        click.echo(f"promptcache lint: {summary}; report written to {output}", err=True)
    else:
        click.echo(text, nl=False)
    if explain:  # after the report, so on a terminal the flows follow the findings they are not
        notes = render.render_notes(results)
        click.echo(notes or "explain: 0 unproven flows\n", nl=False, err=True)
    if unwritten:
        sys.exit(2)
    if fail_on != "never":
        from promptcache.lint_rules import Severity

        threshold = Severity.parse(fail_on)
        if any(d.severity >= threshold for r in results for d in r.diagnostics):
            sys.exit(1)


def _output_unwritable(output: Path) -> str | None:
    """Why the report file ``output`` cannot be written, or None when it can: its folder is
    missing or not a folder (:func:`~promptcache.folders.folder_problem`), or refuses a file
    (tried for real, as :func:`_unwritable`); an existing file is opened for appending, which
    changes nothing in it."""
    problem = folder_problem(output)
    if problem is not None:
        return problem
    if output.exists():
        try:
            with output.open("ab"):
                pass
        except OSError as exc:
            return exc.strerror or str(exc)
        return None
    return _unwritable(output.parent)


def _unwritable(folder: Path) -> str | None:
    """Why a file cannot be written in ``folder`` (the lint cache), or None when it can.

    Tried for real, as the cache would write (permission bits say nothing for root, and
    ``/proc`` refuses new entries whatever they say): the folders missing on the way are made,
    a temporary file is created and removed, then the folders made here are removed again, so
    a run that writes nothing leaves nothing behind.
    """
    made: list[Path] = []
    probe = folder
    while not probe.exists() and probe != probe.parent:
        made.append(probe)
        probe = probe.parent
    try:
        for step in reversed(made):
            step.mkdir()
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".probe-", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        for step in made:
            with contextlib.suppress(OSError):
                step.rmdir()
    return None


def _nothing_to_lint(
    targets: list[Path], config: Any, force_exclude: bool, include_tests: bool
) -> str:
    """The warning of a run that found no file to lint: test files left out are not none."""
    from promptcache.lint_rules.files import discover, walk_leaves_out

    tests = 0 if include_tests else len(discover(targets, config, force_exclude, True))
    # files named on the command line (pre-commit's staged files) in a folder the walk skips
    skipped = (
        sum(1 for t in targets if t.is_file() and walk_leaves_out(t, config.root, True))
        if force_exclude
        else 0
    )
    # and the files that the config's exclude leaves out: named ones (with force_exclude) and
    # those inside the folders searched
    from dataclasses import replace

    unexcluded = len(discover(targets, replace(config, exclude=()), force_exclude, True))
    excluded = unexcluded - len(discover(targets, config, force_exclude, True))
    # and before them, those that .gitignore files leave out
    ignored = (
        len(
            discover(
                targets, replace(config, exclude=(), respect_gitignore=False), force_exclude, True
            )
        )
        - unexcluded
    )
    why = []
    if tests:
        why.append(f"{plural(tests, 'test file')} left out (--include-tests lints them)")
    if skipped:
        why.append(
            f"{plural(skipped, 'file')} left out in folders that a folder's "
            "walk skips (hidden ones, __pycache__, build, dist, venv, node_modules, ...)"
        )
    if excluded:
        why.append(
            f"{plural(excluded, 'file')} left out by the config's exclude"
            + (
                " (--force-exclude applies it to the paths named on the command line)"
                if force_exclude
                else ""
            )
        )
    if ignored:
        why.append(
            f"{plural(ignored, 'file')} left out by .gitignore "
            "(respect-gitignore = false in the config lints them)"
        )
    if why:
        return f"warning: No Python files to lint under the given path(s): {'; '.join(why)}"
    return "warning: No Python files found under the given path(s)"


def _write_atomically(path: Path, data: bytes) -> None:
    """Replace the file ``path`` names (the target, if a symlink) with ``data``, keeping its mode.

    The bytes go to a temporary file in the same folder that then replaces the original, so a
    failure part-way (disk full, a file size limit) leaves the original untouched. Raises
    ``OSError``, also for a file that is not writable (replacing would ignore its mode).
    """
    target = path.resolve()
    if not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_LINE = re.compile(r"[^\n]*\n|[^\n]+")


def _patch(before: str, after: str, path: str, encoding: str) -> bytes:
    r"""The ``--diff`` patch from ``before`` to ``after`` as ``git apply`` and ``patch`` read it:
    lines end at ``\n`` only (a form feed or U+2028 inside a line stays in it), a last line
    without one is marked ``\ No newline at end of file``, a UTF-8 BOM the file starts with is
    kept on its first line, and the file's lines are in the file's own encoding (its coding
    cookie's, such as latin-1), so the context matches the file's bytes."""
    bom = "\ufeff" if encoding == "utf-8-sig" else ""
    text_encoding = "utf-8" if encoding == "utf-8-sig" else encoding
    out = []
    lines = difflib.unified_diff(
        _LINE.findall(bom + before),
        _LINE.findall(bom + after),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    for number, line in enumerate(lines):
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        # the ---/+++ header names the path (UTF-8); the hunks are the file's text
        out.append(line.encode("utf-8" if number < 2 else text_encoding))
    return b"".join(out)


def _apply_fixes(
    results: list[Any], config: Any, write: bool, show_diff: bool, output: Path | None = None
) -> tuple[list[Any], int]:
    """Fix (or diff) every file with fixable findings.

    Returns the results after fixing and how many files could not be written (each reported as
    ``error: cannot write FILE: reason`` on stderr; the other files are still fixed). The patch
    of ``show_diff`` goes to ``output`` when given (written even when empty), else to stdout.
    """
    from promptcache.lint_rules.fix import fix_source, read_source
    from promptcache.lint_rules.runner import lint_source

    updated = []
    changed = 0
    fixes = 0
    unwritten = 0
    patches: list[bytes] = []
    for result in results:
        if not any(d.fix is not None for d in result.diagnostics):
            updated.append(result)
            continue
        path = Path(result.path)
        before, encoding = read_source(path)  # it parsed, so it reads and decodes
        after, count = fix_source(before, result.path, config)
        if after == before:
            updated.append(result)
            continue
        changed += 1
        fixes += count
        if show_diff:
            patches.append(_patch(before, after, result.path, encoding))
        if write:
            try:
                _write_atomically(path, after.encode(encoding))
            except OSError as exc:
                unwritten += 1
                why = exc.strerror or str(exc)
                click.echo(f"error: cannot write {result.path}: {why}", err=True)
                updated.append(result)
                continue
            click.echo(f"fixed {plural(count, 'finding')} in {result.path}", err=True)
            updated.append(lint_source(after, result.path, config))  # until the re-run
        else:
            updated.append(result)
    if show_diff and output is not None:
        try:
            output.write_bytes(b"".join(patches))
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise click.BadParameter(
                f"cannot write {output}: {why}", param_hint="'--output'"
            ) from exc
        # one line on stderr, as a report written with --output gets: what the file holds
        held = (
            f"a patch fixing {plural(fixes, 'finding')} in {plural(changed, 'file')}"
            if changed
            else "an empty patch (no autofix to apply)"
        )
        click.echo(f"promptcache lint: {held} written to {output}", err=True)
    elif show_diff:
        click.echo(b"".join(patches), nl=False)
    if show_diff and not write and changed:
        sys.exit(1)
    return updated, unwritten
