"""Unordered iteration feeding prompt text or tools.

Severity: error
Fix: sometimes

## What it does
Reports text or tool lists built by iterating something whose order is not stable: a set or
frozenset (literal, `set(...)`, comprehension), `os.listdir`, `os.scandir`, `os.walk`,
`glob.glob`, `Path.iterdir/glob/rglob`, `as_completed`, a list shuffled in place by
`random.shuffle`, when the result enters the cached prefix. Each element taken in a loop is
the same element whatever its turn, so a prompt built from one element is not reported; the
element at a fixed index of a shuffled list (`pool[0]`) is drawn at random (PC002), and the one
at a fixed index of a list made from a set (`list(set(answers))[0]`) is whichever element the
hash seed puts there (reported). A set literal of numbers is not reported: a number hashes to
itself, so its order is the same in every process; nor is a set literal of one element (one
element has one order). A value not known to be a number added to such a set of numbers
(`.add`, `.update`, a union), such as a string, or a second element added to a set of one,
makes it a set whose order may change per process (reported). Iteration
inside `sorted(...)`, or of a list sorted in place (`names.sort()`), is fine and not reported;
nor is a list filled by index where the index comes from the element (`for future in
as_completed(futures): out[futures[future]] = future.result()`): each item lands at its task's
place, whatever order they finish in. A list appended to, a dict then
iterated (it keeps insertion order) or an index counted per turn follow the loop's order.
A set filled from a listing or from `as_completed` (`{p.stem for p in Path("skills").glob("*.md")}`,
`set(os.listdir(d))`) keeps its own order, not the order it was filled in: only the set is
reported; an element that joins a listing (`{"; ".join(os.listdir(d)) for d in dirs}`) keeps
the listing's order in its text.

## Why is this bad?
The iteration order of a set of strings depends on the per-process hash seed: two workers, or
one worker after a restart, build different prompt bytes from the same data and never share a
cached prefix (error). Directory listings come in filesystem order: stable on one machine
while the folder is unchanged, different on the next machine and after files change. Vendor
caches are shared by every machine of an organisation, so each order writes its own cache
entry, once per machine and per change of the folder rather than per request: a cost of the
size of a day-precision date's (PC001's info), so a listing is reported as info
(`--fail-on info` fails on it). `as_completed` yields tasks in the order they finish,
which changes from run to run (error), and a shuffled list comes in a new order on every call
(error), or in each process when it is shuffled once at import. A shuffle after
`random.seed(x)` in the same body, where `x` is a constant, a setting or a parameter (not a time
or an id), gives the same order on every run of that body and is not reported.

## Example
```python
tags = {"billing", "refunds", "shipping"}
system = "You handle: " + ", ".join(tags)
```

## Use instead
```python
tags = {"billing", "refunds", "shipping"}
system = "You handle: " + ", ".join(sorted(tags))
```

## Fix safety
The fix wraps the iterated expression in `sorted(...)`. It is offered only when the elements
are known to be strings or paths (so they compare), and is safe then: string literals, the
parts of `str.split()`, the names of a directory listing, or what `str.join` iterates
(`", ".join(set(labels))`: join raises on an element that is not a string). An annotation
(`labels: list[str]`) is not proof: a set of such elements iterated by a `for` loop gets no
fix.

## References
- https://docs.python.org/3/reference/datamodel.html#object.__hash__ (hash randomisation)
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Fix, Location, Related, Severity, TextEdit
from ..context import ModuleContext, written_name
from ..facts import Kind


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for entry, fact in ctx.facts_in_prefix(lambda f, e: f.kind is Kind.UNORDERED):
        fix = None
        # a fact from another module carries no fix: a finding fixes only its own file
        if len(fact.fix) == 5 and fact.fix[4] and not fact.path:
            line, col, end_line, end_col, _ = fact.fix
            fix = Fix(
                "iterate in sorted order: sorted(...)",
                (
                    TextEdit(int(line), int(col), int(line), int(col), "sorted("),
                    TextEdit(int(end_line), int(end_col), int(end_line), int(end_col), ")"),
                ),
            )
        related = list(ctx.chain(fact, "iterated here in an unstable order"))
        if fact.site != (0, 0) and fact.site != (fact.line, fact.col):
            related.append(
                Related(
                    Location(fact.path or ctx.path, *fact.site, *fact.site),
                    f"{fact.detail} is created here",
                    origin=True,
                    value=written_name(fact.detail),
                )
            )
        listing = fact.granularity == "filesystem"
        if listing:
            why = (
                "it comes in filesystem order, which differs between machines and after files "
                "change"
            )
        elif fact.granularity == "completion":
            why = "it comes in the order the tasks finish, which changes from run to run"
        elif fact.granularity == "shuffled" and fact.pinned:
            why = (
                "it is shuffled once per process without a seed, so each process has its own order"
            )
        elif fact.granularity == "shuffled":
            why = "it is shuffled at random, a new order on every call"
        else:
            why = "its order differs between processes"
        yield ctx.diagnostic(
            "PC004",
            f"iteration over {fact.detail} feeds the cached prefix ({entry.sink}); {why}: "
            "iterate sorted(...)",
            entry.node,
            Severity.INFO if listing else Severity.ERROR,
            tuple(related),
            fix,
        )
