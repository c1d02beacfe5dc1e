"""Whether a finding's chain holds against the code it names.

A finding's chain (``Diagnostic.related``, built by ``LintContext.chain``) names where its value
was born and each call that passed it on: "`now_text` passes it on: returned by Clock.now_text"
at ``clock.py:12``. Before a finding is reported, each of those places is read back: the line
must exist in its file, the origin's line must hold the value it names (``now`` for
``datetime.now()``), and a step's line must call the name it gives (``now_text(``,
``.now_text(``, a table of callables ``factories[...](``, the name ending the line, its
arguments on the next, or a field's ``default_factory=now_text``), or read it where the step is
a property's (``.system_prompt``). A finding whose chain does not hold is not proven: like a
flow through a call the analysis cannot see, it is shown only by ``--explain``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._base import Diagnostic

#: the lines of a file by its path (None when it cannot be read)
Lines = Callable[[str], "list[str] | None"]


def chain_holds(diagnostic: Diagnostic, lines_of: Lines) -> bool:
    """True when every place the chain of ``diagnostic`` names shows what the chain says
    there (see the module docstring)."""
    for related in diagnostic.related:
        step = "passes it on: " in related.message and related.message.startswith("`")
        if not (related.origin or step):
            continue
        lines = lines_of(related.location.path)
        if lines is None or not 1 <= related.location.line <= len(lines):
            return False
        line = lines[related.location.line - 1]
        if step and not (related.value and calls(line, related.value)):
            # a property is read, not called: ``.system_prompt`` on the line
            read = "passes it on: read from the property " in related.message
            if not (read and related.value and reads(line, related.value)):
                return False
        if related.origin and related.value and related.value not in line:
            return False
    return True


def calls(line: str, name: str) -> bool:
    """True when ``line`` calls ``name``: ``name(``, ``obj.name(``, ``name[key](``, ``name``
    last on the line (the call's arguments follow on the next), or ``default_factory=name``
    (a field's factory, run for each instance built)."""
    if re.search(rf"(?<!\w){re.escape(name)}\s*(\(|\[|$)", line.rstrip()) is not None:
        return True
    return re.search(rf"default_factory\s*=\s*{re.escape(name)}(?![\w.])", line) is not None


def reads(line: str, name: str) -> bool:
    """True when ``line`` reads the attribute ``name`` (``self.name``, ``agent.name``), not
    as the start of a longer name."""
    return re.search(rf"\.{re.escape(name)}(?!\w)", line) is not None


__all__ = ["Lines", "calls", "chain_holds", "reads"]
