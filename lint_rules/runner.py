"""Lint sources and files: parse, analyse, run the enabled rules, apply suppressions.

``lint_source`` does one module; ``lint_paths`` discovers files and lints them, in parallel
worker processes (``concurrent.futures.ProcessPoolExecutor``) when there are many, serially when
there are few (starting processes costs more than it saves below a few dozen files).
"""

from __future__ import annotations

import ast
import itertools
import os
import warnings
from array import array
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from importlib.util import decode_source
from pathlib import Path
from typing import Any

import pathspec

from ._base import Diagnostic
from .analysis.cache import diagnostic_to_json, digest
from .analysis.exports import load_externals
from .analysis.modules import relative_path
from .analysis.program import Task, lint_program, parsing
from .analysis.reads import InputReads
from .chains import Lines, chain_holds
from .config import LintConfig
from .context import ModuleContext
from .facts import ASSUMED, NOT_SHOWN, AnalysisBoundError, forget_canonical
from .files import discover
from .parse import NewerSyntaxError, is_newer_python, parse_kept, source_lines, where_broken
from .registry import CHECKS, KNOWN_CODES
from .rules.pc000_unparsable_file import from_error
from .suppress import Suppressions, parse_suppressions
from .taint import Analyzer

#: what parsing or compiling a module may raise for bad input (never a linter bug)
_PARSE_ERRORS = (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError)
#: A module containing none of these byte strings has no sink, no system-prompt builder and no
#: breakpoint, so no rule can fire: it is compiled (for PC000) but not analysed. Plain substring
#: tests (memmem) are several times faster than one alternation regex over the same words.
TRIGGERS: tuple[bytes, ...] = (
    b"'system'",
    b'"system"',
    b"'developer'",
    b'"developer"',
    b"system_prompt",
    b"system_message",
    b"system_instruction",
    b"SYSTEM_PROMPT",
    b"SYSTEM_MESSAGE",
    b"SystemMessage",
    b"system prompt",
    b"System prompt",
    b"sys_prompt",
    b".create(",
    b".stream(",
    b".parse(",
    b"converse",
    b"invoke_model",
    b"generate_content",
    b"GenerateContentConfig",
    b"CreateCachedContentConfig",
    b"GenerativeModel",
    b"completion(",
    b"from_messages",
    b"bind_tools",
    b"create_agent",
    b"Agent(",
    b"PromptBuilder",
    b"cache_control",
    b"cachePoint",
    b"prompt_cache_key",
    b"list_tools",
    # the vendor endpoints a raw post's body is a request to (``sinks.HTTP_ENDPOINTS``):
    # ``httpx.post(".../v1/chat/completions", json={"messages": messages, ...})`` is a sink
    # where nothing else in the function names one
    b"/v1/messages",
    b"/v1/chat/completions",
    b"/v1/responses",
)


def _triggered(raw: bytes, config: LintConfig) -> bool:
    if any(word in raw for word in TRIGGERS):
        return True
    return any(s.label.rsplit(".", 1)[-1].encode() in raw for s in config.sinks)


#: ``_triggered``'s answers for whole files, by the file's content hash (``digest``) and the
#: configured sink names: the program driver analyses a file a few times, and each analysis
#: searched the whole text for every trigger word again, twice when it was neither forced
#: nor asked for summaries (``_compiled_only``, then ``analyse_source``)
_FILES_TRIGGERED: dict[tuple[str, tuple[str, ...]], bool] = {}
#: answers kept in one process; past this many, the kept ones are dropped
FILES_TRIGGERED_KEPT = 50_000


def _file_triggered(raw: bytes, content: str, config: LintConfig) -> bool:
    """``_triggered(raw, config)`` for a file whose ``digest`` is ``content``, kept."""
    key = (content, tuple(s.label for s in config.sinks))
    known = _FILES_TRIGGERED.get(key)
    if known is None:
        if len(_FILES_TRIGGERED) >= FILES_TRIGGERED_KEPT:
            _FILES_TRIGGERED.clear()
        known = _FILES_TRIGGERED[key] = _triggered(raw, config)
    return known


def _kept_triggered(tree: ast.AST, config: LintConfig) -> Callable[[bytes], bool]:
    """``_triggered`` for the texts of ``tree``'s functions (``Analyzer``'s relevance), each
    text's answer kept on the tree for ``config``'s sink names: the program driver analyses
    a file a few times on the one tree it keeps (``parse.parse_kept``), and each analysis
    asks again for every function's text."""
    words = tuple(s.label.rsplit(".", 1)[-1] for s in config.sinks)
    kept: dict[tuple[str, ...], dict[bytes, bool]] = tree.__dict__.setdefault("_triggered", {})
    memo = kept.setdefault(words, {})

    def triggered(text: bytes) -> bool:
        known = memo.get(text)
        if known is None:
            known = memo[text] = _triggered(text, config)
        return known

    return triggered


def _segments(raw: bytes) -> Callable[[ast.AST], bytes]:
    """The source bytes of a node's lines (cheap: line offsets are computed once)."""
    starts = array("q", [0, *itertools.accumulate(map(len, raw.splitlines(keepends=True)))])

    def segment(node: ast.AST) -> bytes:
        first = getattr(node, "lineno", 1) - 1
        last = getattr(node, "end_lineno", None) or len(starts) - 1
        return raw[starts[min(first, len(starts) - 1)] : starts[min(last, len(starts) - 1)]]

    return segment


def _kept_segments(tree: ast.AST, raw: bytes) -> Callable[[ast.AST], bytes]:
    """``_segments(raw)`` for the text ``tree`` was parsed from, kept on the tree (the
    program driver analyses a file a few times on the one tree it keeps)."""
    known: Callable[[ast.AST], bytes] | None = tree.__dict__.get("_segments")
    if known is None:
        known = tree.__dict__["_segments"] = _segments(raw)
    return known


def _kept_suppressions(tree: ast.AST, text: str) -> Suppressions:
    """``parse_suppressions(text, KNOWN_CODES)`` for the text ``tree`` was parsed from, kept
    on the tree. The caller must not change it."""
    known: Suppressions | None = tree.__dict__.get("_suppressions")
    if known is None:
        known = tree.__dict__["_suppressions"] = parse_suppressions(text, KNOWN_CODES)
    return known


@dataclass(frozen=True)
class FileResult:
    """What linting one file produced.

    ``diagnostics`` sorted by position; ``errors``: bad suppression comments ("path:line: ...");
    ``lines``: the text of each line a diagnostic points at (to turn UTF-8 byte columns into
    character columns for output). ``skipped``: "template" for a file that does not parse and
    stops at a ``{{``/``{%`` placeholder (``is_template``): it is not linted and gives no
    PC000; "" for a file that was linted. ``notes``: findings whose chain is not proven
    (``proven``), so not findings; ``promptcache lint --explain`` shows them.
    """

    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    errors: tuple[str, ...] = ()
    lines: dict[int, str] = field(default_factory=dict)
    skipped: str = ""
    notes: tuple[Diagnostic, ...] = ()


def is_template(raw: bytes, exc: BaseException) -> bool:
    """A file that failed to parse is a template of a Python file when the line the parser
    stopped at holds a placeholder, ``{{`` or ``{%`` (cookiecutter, copier and Jinja:
    ``from {{ folder_name }} import app``); an f-string's ``{{`` elsewhere in a file with a
    real syntax error is not one. Without a line number, any ``{{ `` or ``{%`` in the file."""
    line = getattr(exc, "lineno", None)
    if isinstance(line, int) and line > 0:
        lines = raw.splitlines()
        text = lines[line - 1] if line <= len(lines) else b""
        return b"{{" in text or b"{%" in text
    return b"{{ " in raw or b"{%" in raw


def _codes_for(path: str, config: LintConfig) -> frozenset[str]:
    codes = config.enabled(KNOWN_CODES)
    if config.per_file_ignores:
        rel = _relative_to_root(path, config.root)
        for pattern, ignored in config.per_file_ignores:
            if pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(rel):
                codes = codes - ignored
    return codes


def _relative_to_root(path: str, root: Path) -> str:
    """``path`` relative to the config's folder, as named (a symlink is not its target)."""
    for resolve in (os.path.abspath, os.path.realpath):
        try:
            return Path(resolve(path)).relative_to(resolve(root)).as_posix()
        except ValueError:
            continue
    return Path(path).as_posix()


def lint_source(
    source: str | bytes, path: str = "<string>", config: LintConfig | None = None
) -> FileResult:
    """Lint one module's source on its own. Never raises for bad input: unparsable code gives
    PC000.

    A module without any trigger word (``TRIGGERS``: sink names, ``"system"``, breakpoints, ...)
    cannot produce any other finding: it is only compiled (cheaper than building the tree), so
    a syntax error in it is still PC000. ``lint_paths`` lints files as one program instead.
    """
    return analyse_source(source, path, config or LintConfig())[0]


def analyse_source(
    source: str | bytes,
    path: str,
    config: LintConfig,
    module: str = "",
    is_package: bool = False,
    externals: dict[str, Any] | None = None,
    requests: Collection[str] = (),
    force: bool = False,
    sink_calls: Collection[str] = (),
    reads: InputReads | None = None,
    unsent: Collection[str] = (),
    triggered: bool | None = None,
) -> tuple[FileResult, dict[str, Any], dict[str, bool], bool]:
    """Lint one module as part of a program; returns (result, exports, wanted, triggered).

    ``module``/``is_package``: its dotted name (for relative imports); ``externals``: what
    other modules export, as the program driver's blobs; ``requests``: symbols to export
    whether or not a rule needed them; ``force``: analyse even without a trigger word;
    ``sink_calls``: the ``name(`` texts of other modules' sink functions that the file calls
    (a function holding one is analysed as if it held a trigger word); ``reads``: where the
    parts of ``externals`` that the analysis reads are noted (``analysis.reads``);
    ``unsent``: the program's own message classes no module turns into request messages;
    ``triggered``: ``_triggered`` of the source when the caller knows it already.
    ``exports`` and ``wanted`` are described in ``analysis.program``.
    """
    raw = source.encode("utf-8") if isinstance(source, str) else source
    if triggered is None:
        triggered = _triggered(raw, config)
    run_engine = triggered or force or bool(requests)
    if not run_engine and b"promptcache:" not in raw:  # (``_compiled_only``)
        # no rule can fire, but a file that does not parse is still PC000: compiling to
        # bytecode checks the syntax about 1.6x faster than building the Python-level tree
        return _syntax_only(raw, path, config), {}, {}, False
    codes = _codes_for(path, config)
    try:
        # text is parsed as text: its coding cookie no longer describes these bytes
        with parsing():
            tree = parse_kept(source if isinstance(source, str) else raw, path)
        text = source if isinstance(source, str) else decode_source(raw)
    except NewerSyntaxError:
        # valid newer Python this ast cannot read: nothing to report
        return FileResult(path), {}, {}, triggered
    except _PARSE_ERRORS as exc:
        if is_template(raw, exc):
            return FileResult(path, skipped="template"), {}, {}, False
        return (
            FileResult(path, (from_error(path, exc),) if "PC000" in codes else ()),
            {},
            {},
            triggered,
        )
    diagnostics: list[Diagnostic] = []
    notes: list[Diagnostic] = []
    exports: dict[str, Any] = {}
    wanted: dict[str, bool] = {}
    if run_engine:
        try:
            analyzer = Analyzer(
                tree,
                config.sinks,
                _kept_segments(tree, raw),
                _kept_triggered(tree, config),
                module,
                is_package,
                load_externals(externals, reads) if externals else None,
                tuple(name.encode() for name in sink_calls),
                unsent,
            )
            if triggered or force:
                entries, sinks = analyzer.run()
            else:
                # asked only for summaries: no rule can fire here, so only the module body
                # runs, and the requested functions on demand (in export)
                entries, sinks = analyzer.run_module_only()
            exports = analyzer.export(requests, path)
            wanted = analyzer.wanted
            ctx = ModuleContext(
                path,
                text,
                tree,
                config,
                entries,
                sinks,
                analyzer.breakpoint_calls,
                handed_turns=analyzer.handed_turns,
            )
            lines_of = _line_reader(path, text)
            for code in sorted(codes):
                check = CHECKS.get(code)
                if check is not None:
                    for diagnostic in check(ctx):
                        # a chain through a call the analysis cannot see, or one whose places
                        # do not show what it says, is not proven
                        held = proven(diagnostic) and chain_holds(diagnostic, lines_of)
                        (diagnostics if held else notes).append(diagnostic)
        except RecursionError:
            # code nested deeper than the analysis can follow: say so, lint the other files
            diagnostics = (
                [_not_analysed(path, "it nests deeper than the analysis can follow")]
                if "PC000" in codes
                else []
            )
        except AnalysisBoundError as exc:
            # values grown past MAX_VALUE_FACTS: say so, lint the other files
            diagnostics = (
                [
                    _not_analysed(
                        path, f"its values carry more facts than the analysis bounds ({exc})"
                    )
                ]
                if "PC000" in codes
                else []
            )
        finally:
            forget_canonical()
    suppressions = _kept_suppressions(tree, text)
    kept = _merge_duplicates([d for d in diagnostics if not _suppressed(suppressions, d)])
    notes = _merge_duplicates([d for d in notes if not _suppressed(suppressions, d)])
    errors = tuple(f"{path}:{e}" for e in suppressions.errors)
    lines: dict[int, str] = {}
    if kept or notes:
        all_lines = source_lines(text)
        for d in [*kept, *notes]:
            wanted_lines = [d.location.line, d.location.end_line]
            wanted_lines += [r.location.line for r in d.related if r.location.path == path]
            if d.fix is not None:
                wanted_lines += [n for e in d.fix.edits for n in (e.line, e.end_line)]
            for number in wanted_lines:
                if 0 < number <= len(all_lines):
                    lines[number] = all_lines[number - 1]
    return (
        FileResult(path, tuple(kept), errors, lines, notes=tuple(notes)),
        exports,
        wanted,
        triggered,
    )


def _line_reader(path: str, text: str) -> Lines:
    """The lines of a file a chain names: ``text`` for ``path`` itself, another file read
    once (None when it cannot be read or decoded). Each file is split at its first use: most
    analyses check no chain, and splitting every file's text at each of its analyses took
    about 1% of a large tree's cold run."""
    read: dict[str, list[str] | None] = {}

    def lines_of(name: str) -> list[str] | None:
        if name not in read:
            if name == path:
                read[name] = source_lines(text)
                return read[name]
            try:
                read[name] = source_lines(decode_source(Path(name).read_bytes()))
            except (OSError, UnicodeDecodeError, SyntaxError):
                read[name] = None
        return read[name]

    return lines_of


def proven(diagnostic: Diagnostic) -> bool:
    """False when a step of the finding's chain passes through a call whose code the analysis
    cannot see ("assumed to pass through f()"), or a note of it says that what it carries is
    not shown to change (``NOT_SHOWN``: one MCP server's own tool list): an unproven flow,
    shown only by ``--explain``."""
    return not any(
        (r.message.startswith("`") and f"passes it on: {ASSUMED}" in r.message)
        or r.message.startswith(NOT_SHOWN)
        for r in diagnostic.related
    )


def analyse_file(
    task: Task, config: LintConfig, raw: bytes | None = None, reads: InputReads | None = None
) -> dict[str, Any]:
    """Run one of the program driver's tasks; the output is plain JSON data (cacheable).
    ``reads``: where what the analysis reads of ``task.externals`` is noted."""
    content = ""
    if raw is None:
        try:
            raw = Path(task.path).read_bytes()
        except OSError as exc:
            # PC000 like a file that does not parse: only where --select/ignore keep it
            selected = "PC000" in _codes_for(task.path, config)
            result = FileResult(task.path, (from_error(task.path, exc),) if selected else ())
            return _output(result, {}, {}, False, task.force, "unreadable", task.sink_calls)
    content = digest(raw)
    triggered = _file_triggered(raw, content, config)
    if _compiled_only(raw, config, task.force, task.requests, triggered):
        # the syntax check is all this analysis would do, and it tells only this file's own
        # result: the driver does it once the file's last analysis is known (``checked``),
        # not for a file a later analysis parses anyway (in a cold run most of them)
        output = _output(FileResult(task.path), {}, {}, False, task.force, content, task.sink_calls)
        output[UNCHECKED] = True
    else:
        result, exports, wanted, triggered = analyse_source(
            raw,
            task.path,
            config,
            task.module,
            task.is_package,
            task.externals,
            task.requests,
            task.force,
            task.sink_calls,
            reads,
            task.unsent,
            triggered,
        )
        output = _output(result, exports, wanted, triggered, task.force, content, task.sink_calls)
    if task.unsent:
        output["unsent"] = list(task.unsent)
    return output


#: the key of an ``analyse_file`` output whose syntax check is still to be done (``checked``)
UNCHECKED = "syntax_unchecked"


def _compiled_only(
    raw: bytes,
    config: LintConfig,
    force: bool,
    requests: Collection[str],
    triggered: bool | None = None,
) -> bool:
    """Whether ``analyse_source`` only compiles this file (``_syntax_only``): nothing triggers,
    forces or asks for its analysis, and it holds no suppression comment. ``triggered``:
    ``_triggered`` of ``raw`` when the caller knows it already."""
    if force or requests:
        return False
    if triggered is None:
        triggered = _triggered(raw, config)
    return not triggered and b"promptcache:" not in raw


def checked(output: dict[str, Any], path: str, config: LintConfig) -> dict[str, Any]:
    """``output``, an ``analyse_file`` output whose syntax check was left for later
    (``UNCHECKED``), with its result as ``analyse_source`` gives it for a file it only
    compiles (``_syntax_only``; PC000 where the file cannot be read now)."""
    try:
        result = _syntax_only(Path(path).read_bytes(), path, config)
    except OSError as exc:
        selected = "PC000" in _codes_for(path, config)
        result = FileResult(path, (from_error(path, exc),) if selected else ())
    out = {k: v for k, v in output.items() if k != UNCHECKED}
    out["result"] = _output(result, {}, {}, False, False, "")["result"]
    return out


def _output(
    result: FileResult,
    exports: dict[str, Any],
    wanted: dict[str, bool],
    triggered: bool,
    forced: bool,
    content: str,
    sink_calls: Collection[str] = (),
) -> dict[str, Any]:
    return {
        "result": {
            "diagnostics": [diagnostic_to_json(d) for d in result.diagnostics],
            "errors": list(result.errors),
            "lines": {str(k): v for k, v in result.lines.items()},
            "skipped": result.skipped,
            "notes": [diagnostic_to_json(d) for d in result.notes],
        },
        "exports": exports,
        "wanted": wanted,
        "triggered": triggered,
        "forced": forced,
        "sink_calls": list(sink_calls),
        "content": content,
    }


def _syntax_only(raw: bytes, path: str, config: LintConfig) -> FileResult:
    """PC000 if ``raw`` does not compile, else nothing (for files no other rule can flag)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(raw, path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except _PARSE_ERRORS as exc:
        if isinstance(exc, SyntaxError) and is_newer_python(raw, exc):
            return FileResult(path)  # valid Python of a newer version than the one running
        if is_template(raw, exc):
            return FileResult(path, skipped="template")
        if "PC000" in _codes_for(path, config):
            if isinstance(exc, SyntaxError):
                exc = where_broken(raw, exc)
            return FileResult(path, (from_error(path, exc),))
    return FileResult(path)


def _not_analysed(path: str, why: str) -> Diagnostic:
    diagnostic = from_error(path, ValueError(f"cannot analyse this file: {why}"))
    return replace(diagnostic, message=f"cannot analyse this file: {why}")


def _suppressed(suppressions: Suppressions, diagnostic: Diagnostic) -> bool:
    """Whether a comment covers ``diagnostic``: on the line it is reported at, or on each line
    where its value enters a request (``Diagnostic.requested``)."""
    code = diagnostic.code
    if suppressions.suppressed(code, diagnostic.location.line):
        return True
    lines = diagnostic.requested
    return bool(lines) and all(suppressions.suppressed(code, line) for line in lines)


def _merge_duplicates(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """One finding per (code, place, message); the origins of duplicates are combined."""
    merged: dict[tuple[object, ...], Diagnostic] = {}
    for d in sorted(diagnostics, key=lambda d: (d.sort_key, d.message)):
        key = (d.code, d.location, d.message)
        first = merged.get(key)
        if first is None:
            merged[key] = d
        else:
            extra = tuple(r for r in d.related if r not in first.related)
            merged[key] = replace(first, related=first.related + extra)
    return list(merged.values())


def lint_file(path: str, config: LintConfig) -> FileResult:
    """Lint one file on disk; an unreadable file is reported as PC000."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        selected = "PC000" in _codes_for(path, config)
        return FileResult(path, (from_error(path, exc),) if selected else ())
    return lint_source(raw, path, config)


def _display(path: Path) -> str:
    """``path`` relative to the working folder (``os.path.relpath``'s answer)."""
    try:
        return relative_path(os.path.abspath(path), os.getcwd())
    except ValueError:
        return str(path)


def lint_paths(
    paths: Iterable[Path],
    config: LintConfig,
    jobs: int | None = None,
    force_exclude: bool = False,
    cache_dir: Path | None = None,
    include_tests: bool = False,
) -> list[FileResult]:
    """Discover files and lint them as one program; results in path order.

    ``jobs``: worker processes (default: the CPU count; 1 = serial). ``force_exclude``: apply
    ``exclude`` to files named directly, and leave out those a folder's walk leaves out.
    ``cache_dir``: where cached results live (None: no cache). ``include_tests``: also lint
    test folders and test files found inside folders (``files.is_test_path``). Values are
    followed across the files' functions, methods and modules (see ``analysis.program``).
    """
    found = discover(list(paths), config, force_exclude, include_tests)
    files = [_display(p) for p in found]
    results, _ = lint_program(files, config, jobs, cache_dir)
    return _once_per_file(results)


def _once_per_file(results: list[FileResult]) -> list[FileResult]:
    """One result per file on disk: a file reached twice (``sub/link.py``, a symbolic link to
    ``pkg/app.py``, or named both ways) is reported once, under the path that goes through no
    link where there is one, else the first, so its findings are neither counted twice nor
    patched twice by ``--diff``. Every path is still analysed (a module may be imported by
    the link's name)."""
    by_file: dict[str, list[FileResult]] = {}
    for result in results:
        by_file.setdefault(os.path.realpath(result.path), []).append(result)
    kept = set()
    for real, same in by_file.items():
        direct = [r for r in same if os.path.abspath(r.path) == real]
        kept.add(id((direct or same)[0]))
    return [r for r in results if id(r) in kept]
