"""The linter's data types: severities, text edits, fixes, diagnostics and rule metadata.

Positions follow the standard ``ast`` module: lines are 1-based, columns are 0-based offsets in
UTF-8 bytes of the line (what ``ast`` reports as ``col_offset``). Every type here is a frozen
dataclass, so diagnostics can be sent between worker processes, hashed and sorted.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(enum.IntEnum):
    """How bad a finding is. Ordered, so ``--fail-on warning`` means warning or worse."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> Severity:
        """``"error"`` -> ``Severity.ERROR``; raises ``ValueError`` naming the accepted values."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown severity {text!r}: use one of info, warning, error"
            ) from None

    def __str__(self) -> str:
        return self.name.lower()


class FixAvailability(enum.Enum):
    """Whether a rule can offer an autofix (ruff's ``FIX_AVAILABILITY``)."""

    NONE = "none"
    SOMETIMES = "sometimes"
    ALWAYS = "always"


@dataclass(frozen=True, order=True)
class TextEdit:
    """Replace the source between two positions with ``text`` (an insertion when they are equal).

    ``line``/``end_line`` are 1-based; ``col``/``end_col`` are 0-based UTF-8 byte offsets within
    their line, exactly as ``ast`` reports ``col_offset``/``end_col_offset``.
    """

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(frozen=True)
class Fix:
    """A set of edits that together repair one finding; applied all or nothing by ``--fix``."""

    title: str
    edits: tuple[TextEdit, ...]


@dataclass(frozen=True, order=True)
class Location:
    """A span in a file: 1-based lines, 0-based UTF-8 byte columns (``ast`` positions)."""

    path: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0


@dataclass(frozen=True)
class Related:
    """A secondary location of a finding. ``origin``: this is where the volatile value was born
    (text output shows the first origin as ``[origin: path:line]``). ``value``: the name of the
    value or call this step of the chain passes on, as written on that line (``now`` for
    ``datetime.now()``, ``now_text`` for the call ``clock.now_text()``); "" when the step is a
    description rather than a name."""

    location: Location
    message: str
    origin: bool = False
    value: str = ""


@dataclass(frozen=True)
class Diagnostic:
    """One finding: rule code, where it is, what is wrong, where the value came from, a fix.

    ``location`` is where the volatile value enters the cached prefix (or the construct at
    fault); ``related`` lists origins (where the value was born) and other helpful places.
    ``requested``: the lines, in ``location``'s file, of the request arguments the value
    enters through (``system=s`` for ``s = f"{now}"``, reported at the f-string's line), ()
    where none is known: a suppression on all of them covers the finding as one on
    ``location``'s line does.
    """

    code: str
    message: str
    location: Location
    severity: Severity
    related: tuple[Related, ...] = ()
    fix: Fix | None = None
    requested: tuple[int, ...] = field(default=(), compare=False)

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.location.path, self.location.line, self.location.col, self.code)


@dataclass(frozen=True)
class Rule:
    """A lint rule's metadata, parsed from the docstring of its module (the only source).

    ``sections`` maps ruff's doc headings ("What it does", "Why is this bad?", "Example",
    "Use instead", "Fix safety", "Options", "References", ...) to their Markdown text.
    """

    code: str
    name: str
    summary: str
    severity: Severity
    fix: FixAvailability
    sections: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
