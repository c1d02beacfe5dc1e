"""Lint sources and files: parse, analyse, run the enabled rules, apply suppressions.

``lint_source`` does one module; ``lint_paths`` discovers files and lints them, in parallel
worker processes (``concurrent.futures.ProcessPoolExecutor``) when there are many, serially when
there are few (starting processes costs more than it saves below a few dozen files).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from importlib.util import decode_source
from pathlib import Path

import pathspec

from ._base import Diagnostic
from .config import LintConfig
from .context import ModuleContext
from .files import discover
from .registry import CHECKS, KNOWN_CODES
from .rules.pc000_unparsable_file import from_error
from .suppress import parse_suppressions
from .taint import Analyzer

#: below this many files, lint in this process
SERIAL_LIMIT = 48
#: a module with none of these words cannot contain a sink: skip the (costly) analysis
_TRIGGER = re.compile(
    rb"messages|system|tools|prompt|completion|converse|invoke_model|generate_content|"
    rb"cache_control|cachePoint|PromptBuilder|Agent|instructions|SystemMessage|caches"
)


@dataclass(frozen=True)
class FileResult:
    """What linting one file produced.

    ``diagnostics`` sorted by position; ``errors``: bad suppression comments ("path:line: ...");
    ``lines``: the text of each line a diagnostic points at (to turn UTF-8 byte columns into
    character columns for output).
    """

    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    errors: tuple[str, ...] = ()
    lines: dict[int, str] = field(default_factory=dict)


def _codes_for(path: str, config: LintConfig) -> frozenset[str]:
    codes = config.enabled(KNOWN_CODES)
    if config.per_file_ignores:
        try:
            rel = Path(path).resolve().relative_to(config.root.resolve()).as_posix()
        except ValueError:
            rel = Path(path).as_posix()
        for pattern, ignored in config.per_file_ignores:
            if pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(rel):
                codes = codes - ignored
    return codes


def lint_source(
    source: str | bytes, path: str = "<string>", config: LintConfig | None = None
) -> FileResult:
    """Lint one module's source. Never raises for bad input: unparsable code gives PC000."""
    config = config or LintConfig()
    codes = _codes_for(path, config)
    raw = source.encode("utf-8") if isinstance(source, str) else source
    try:
        tree = ast.parse(raw, filename=path)
        text = source if isinstance(source, str) else decode_source(raw)
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
        return FileResult(path, (from_error(path, exc),) if "PC000" in codes else ())
    diagnostics: list[Diagnostic] = []
    if _TRIGGER.search(raw) or any(
        s.label.rsplit(".", 1)[-1].encode() in raw for s in config.sinks
    ):
        entries, sinks = Analyzer(tree, config.sinks).run()
        ctx = ModuleContext(path, text, tree, config, entries, sinks)
        for code in sorted(codes):
            check = CHECKS.get(code)
            if check is not None:
                diagnostics.extend(check(ctx))
    suppressions = parse_suppressions(text, KNOWN_CODES)
    kept = [d for d in diagnostics if not suppressions.suppressed(d.code, d.location.line)]
    kept = sorted(set(kept), key=lambda d: (d.sort_key, d.message))
    errors = tuple(f"{path}:{e}" for e in suppressions.errors)
    lines: dict[int, str] = {}
    if kept:
        all_lines = text.splitlines()
        for d in kept:
            wanted = [d.location.line, d.location.end_line]
            wanted += [r.location.line for r in d.related]
            if d.fix is not None:
                wanted += [n for e in d.fix.edits for n in (e.line, e.end_line)]
            for number in wanted:
                if 0 < number <= len(all_lines):
                    lines[number] = all_lines[number - 1]
    return FileResult(path, tuple(kept), errors, lines)


def lint_file(path: str, config: LintConfig) -> FileResult:
    """Lint one file on disk; an unreadable file is reported as PC000."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        return FileResult(path, (from_error(path, exc),))
    return lint_source(raw, path, config)


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def lint_paths(
    paths: Iterable[Path], config: LintConfig, jobs: int | None = None
) -> list[FileResult]:
    """Discover and lint files; results in path order. ``jobs``: worker processes (default:
    the CPU count; 1 = serial)."""
    files = [_display(p) for p in discover(list(paths), config)]
    workers = jobs or os.cpu_count() or 1
    if workers <= 1 or len(files) < SERIAL_LIMIT:
        return [lint_file(f, config) for f in files]
    chunk = max(1, min(64, len(files) // (workers * 8)))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lint_file, files, [config] * len(files), chunksize=chunk))
