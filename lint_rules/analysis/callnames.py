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
#: precedes ``(`` in the file, reversed). Searching the reversed bytes lets the search skip to
#: each ``(``
_CALL_REVERSED = re.compile(rb"\((\w+)")
#: the same runs when a ``.`` precedes them in the file (``\w+`` is greedy and ``.`` is no word
#: character, so only a maximal run matches)
_DOTTED_REVERSED = re.compile(rb"\((\w+)\.")
#: what ``contains`` can answer from the index: ``name(`` or ``.name(`` of word characters
_INDEXED = re.compile(rb"\.?\w+\(")
_DOT = ord(".")
#: ``_INDEXED``'s answer per text asked: the driver asks every file for the same sink names
_indexed: dict[bytes, bool] = {}


class CallNames:
    """The call texts of one file (``path``): built from its bytes, read once."""

    def __init__(self, path: str, raw: bytes) -> None:
        self.path = path
        backwards = raw[::-1]
        #: each run reversed, sorted: the runs ending with ``name`` are those whose reversal
        #: starts with ``name`` reversed, found by bisection
        self._reversed = sorted(set(_CALL_REVERSED.findall(backwards)))
        #: the runs that follow a ``.``, reversed (built without a loop over the matches: a
        #: warm run builds the index of nearly every file in its first plan)
        self._dotted = frozenset(_DOTTED_REVERSED.findall(backwards))

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
        indexed = _indexed.get(text)
        if indexed is None:
            if len(_indexed) > 100_000:
                _indexed.clear()
            indexed = _indexed[text] = _INDEXED.fullmatch(text) is not None
        if not indexed:
            try:
                return text in Path(self.path).read_bytes()
            except OSError:
                return False
        if text[0] == _DOT:
            return text[-2:0:-1] in self._dotted  # the name, reversed
        key = text[-2::-1]  # the name, reversed
        runs = self._reversed
        at = bisect.bisect_left(runs, key)
        return at < len(runs) and runs[at].startswith(key)
