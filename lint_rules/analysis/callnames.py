"""Which ``name(`` and ``.name(`` texts occur in a file, asked for many names over a run.

The program driver looks for calls of other modules' sink functions in every file
(``Program._plan``): each wave that finds new sink functions asks each file whether its bytes
contain ``name(`` or ``.name(``. ``CallNames`` reads a file once and answers each question with
a set lookup or a binary search, giving the same answer as the substring test ``name in raw``:

- ``name(`` is in the bytes exactly when some maximal run of word characters followed by ``(``
  ends with ``name`` (``(`` is not a word character, so an occurrence of ``name(`` ends such a
  run; ``my_name(`` holds ``name(`` too);
- ``.name(`` is in the bytes exactly when such a run equals ``name`` and follows a ``.``.

Word characters are those of ``re``'s bytes patterns (ASCII letters, digits, ``_``); a name
with other bytes is looked up in the file's bytes, read again.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path

#: in the file's bytes reversed: ``(``, then a maximal run of word characters (a run that
#: precedes ``(`` in the file, reversed; group 1), then the ``.`` before it if any (group 2).
#: Searching the reversed bytes lets the search skip to each ``(``
_CALL_REVERSED = re.compile(rb"\((\w+)(\.?)")
#: what ``contains`` can answer from the index: ``name(`` or ``.name(`` of word characters
_INDEXED = re.compile(rb"\.?\w+\(")
_DOT = ord(".")


class CallNames:
    """The call texts of one file (``path``): built from its bytes, read once."""

    def __init__(self, path: str, raw: bytes) -> None:
        self.path = path
        runs: set[bytes] = set()
        dotted: set[bytes] = set()
        for run, dot in _CALL_REVERSED.findall(raw[::-1]):
            runs.add(run)
            if dot:
                dotted.add(run[::-1])
        #: each run reversed, sorted: the runs ending with ``name`` are those whose reversal
        #: starts with ``name`` reversed, found by bisection
        self._reversed = sorted(runs)
        self._dotted = frozenset(dotted)

    @classmethod
    def read(cls, path: str) -> CallNames:
        """The index of the file at ``path`` (an unreadable file holds no call)."""
        try:
            raw = Path(path).read_bytes()
        except OSError:
            raw = b""
        return cls(path, raw)

    def contains(self, text: bytes) -> bool:
        """Whether ``text`` (``name(`` or ``.name(``) occurs in the file's bytes."""
        if _INDEXED.fullmatch(text) is None:
            try:
                return text in Path(self.path).read_bytes()
            except OSError:
                return False
        if text[0] == _DOT:
            return text[1:-1] in self._dotted
        key = text[-2::-1]  # the name, reversed
        runs = self._reversed
        at = bisect.bisect_left(runs, key)
        return at < len(runs) and runs[at].startswith(key)
