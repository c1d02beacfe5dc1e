"""Suppression comments: ``# promptcache: ignore[PC001]`` and ``# promptcache: ignore-file[PC003]``.

A trailing comment suppresses findings on its own line; a comment alone on a line suppresses
findings on that line and the next one (the "line above" form). ``ignore-file`` anywhere in the
file suppresses the codes for the whole file. Codes are required and checked: an unknown code is
an error, so a typo cannot silently disable nothing. Case does not matter (as ruff's ``# NOQA``):
``# PROMPTCACHE: IGNORE[pc001]`` is the same comment.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

_COMMENT = re.compile(r"promptcache:\s*(ignore-file|ignore)\b\s*(\[([^\]]*)\])?", re.IGNORECASE)


@dataclass
class Suppressions:
    """Parsed suppressions of one file. ``errors`` lists bad comments as "line: message"."""

    by_line: dict[int, set[str]] = field(default_factory=dict)
    file_wide: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def suppressed(self, code: str, line: int) -> bool:
        return code in self.file_wide or code in self.by_line.get(line, ())


def parse_suppressions(source: str, known: frozenset[str]) -> Suppressions:
    """Read suppression comments from ``source`` (cheap when there are none)."""
    result = Suppressions()
    if _COMMENT.search(source) is None:
        return result
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return result
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = _COMMENT.search(token.string)
        if match is None:
            continue
        line = token.start[0]
        kind = match.group(1).lower()
        if match.group(2) is None:
            result.errors.append(
                f"{line}: name the rules to ignore, e.g. `# promptcache: {kind}[PC001]`"
            )
            continue
        codes = {c.strip().upper() for c in match.group(3).split(",") if c.strip()}
        unknown = sorted(codes - known)
        if unknown or not codes:
            result.errors.append(
                f"{line}: unknown rule id(s) {', '.join(unknown) or '(none given)'} in "
                f"`{match.group(0)}`; run `promptcache rules` for the list"
            )
            codes -= set(unknown)
        if kind == "ignore-file":
            result.file_wide |= codes
            continue
        result.by_line.setdefault(line, set()).update(codes)
        own_line = token.line[: token.start[1]].strip() == ""
        if own_line:
            result.by_line.setdefault(line + 1, set()).update(codes)
    return result
