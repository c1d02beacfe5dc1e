"""Apply autofixes: non-overlapping text edits, repeated until stable, then re-parsed.

Each round applies every fix whose edits do not overlap an edit already taken this round
(ruff's approach); the file is linted again and the next round picks up what was left. The
result must parse (``ast`` and ``libcst``) and keep every comment, or nothing is written:
``FixConflictError`` explains why.
"""

from __future__ import annotations

import difflib
import io
import tokenize
from collections import Counter
from pathlib import Path

from promptcache.errors import FixConflictError

from ._base import Diagnostic, TextEdit
from .config import LintConfig
from .parse import LIBCST_VERSION, NewerSyntaxError, parse_module
from .runner import lint_source

MAX_ROUNDS = 10


def apply_edits(source: str, edits: list[TextEdit]) -> str:
    """Apply non-overlapping edits (1-based lines, 0-based UTF-8 byte columns) to ``source``."""
    data = source.encode("utf-8")
    starts = [0]
    for index, byte in enumerate(data):
        if byte == 0x0A:
            starts.append(index + 1)

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + col if line - 1 < len(starts) else len(data)

    for edit in sorted(edits, key=lambda e: (e.line, e.col, e.end_line, e.end_col), reverse=True):
        start = offset(edit.line, edit.col)
        end = offset(edit.end_line, edit.end_col)
        data = data[:start] + edit.text.encode("utf-8") + data[end:]
    return data.decode("utf-8")


def _span(edit: TextEdit) -> tuple[tuple[int, int], tuple[int, int]]:
    return (edit.line, edit.col), (edit.end_line, edit.end_col)


def _overlaps(taken: list[TextEdit], edit: TextEdit) -> bool:
    start, end = _span(edit)
    for other in taken:
        o_start, o_end = _span(other)
        if start == end == o_start == o_end:
            return True  # two insertions at one point: order would be ambiguous
        if start < o_end and o_start < end:
            return True
        if start == end and o_start < start < o_end:
            return True
    return False


def _select(diagnostics: tuple[Diagnostic, ...]) -> list[TextEdit]:
    taken: list[TextEdit] = []
    seen: set[tuple[TextEdit, ...]] = set()
    for d in diagnostics:
        if d.fix is None or d.fix.edits in seen:
            continue
        seen.add(d.fix.edits)
        if any(_overlaps(taken, e) for e in d.fix.edits):
            continue
        taken.extend(d.fix.edits)
    return taken


def _comments(source: str) -> Counter[str]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return Counter(t.string for t in tokens if t.type == tokenize.COMMENT)


def check_rewrite(before: str, after: str, path: str) -> None:
    """Raise ``FixConflictError`` unless ``after`` parses (ast and libcst) and keeps every
    comment of ``before``."""
    import libcst

    try:
        libcst.parse_module(after, config=libcst.PartialParserConfig(python_version=LIBCST_VERSION))
        parse_module(after, path)  # ast, or libcst for newer syntax than the running Python's
    except NewerSyntaxError:
        pass  # valid newer Python (libcst parsed it) that this Python's ast cannot read
    except (SyntaxError, ValueError, libcst.ParserSyntaxError) as exc:
        raise FixConflictError(
            f"{path}: the autofix produced code that does not parse ({exc}); nothing was "
            "written: please report this with the file"
        ) from exc
    if _comments(after) != _comments(before):
        raise FixConflictError(f"{path}: the autofix would drop a comment; nothing was written")


def fix_source(source: str, path: str, config: LintConfig) -> tuple[str, int]:
    """Return (fixed source, number of fixes applied). Raises ``FixConflictError`` when the
    rewritten file does not parse or loses a comment (nothing should then be written)."""
    applied = 0
    current = source
    for _ in range(MAX_ROUNDS):
        result = lint_source(current, path, config)
        edits = _select(result.diagnostics)
        if not edits:
            break
        candidate = apply_edits(current, edits)
        check_rewrite(current, candidate, path)
        applied += sum(
            1 for d in result.diagnostics if d.fix is not None and d.fix.edits[0] in edits
        )
        current = candidate
    else:
        raise FixConflictError(
            f"{path}: autofixes did not settle after {MAX_ROUNDS} rounds; nothing was written"
        )
    return current, applied


def read_source(path: Path) -> tuple[str, str]:
    """A module's text and encoding (its coding cookie or BOM, else UTF-8), line endings kept
    as they are, so that writing ``text.encode(encoding)`` back changes only what was fixed.

    Raises ``SyntaxError`` for an unknown coding cookie, ``UnicodeDecodeError`` for bytes the
    encoding cannot decode and ``OSError`` when the file cannot be read.
    """
    raw = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    return raw.decode(encoding), encoding


def unified_diff(before: str, after: str, path: str) -> str:
    """The patch from ``before`` to ``after`` (``--diff`` output)."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
    )
