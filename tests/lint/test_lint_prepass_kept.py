"""The summaries the class pre-pass keeps for the recording pass (``taint.Analyzer._take``)
change nothing: a module analysed with them gives the same prefix entries, sink calls,
breakpoint calls, wanted names and exports as when every summary the recording pass asks for
is computed again. Run on every test program and on the linter's own modules (real classes
whose methods read, store and call each other), and some summaries must be taken."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

from promptcache.lint_rules.config import LintConfig
from promptcache.lint_rules.facts import Fact
from promptcache.lint_rules.runner import _segments, _triggered
from promptcache.lint_rules.taint import Analyzer, ClassInfo, Summary

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    [*(ROOT / "tests" / "lint" / "programs").rglob("*.py"), *(ROOT / "lint_rules").rglob("*.py")]
)


class Recomputing(Analyzer):
    """Takes none of the pre-pass's summaries: the recording pass computes each again."""

    def _take(self, func: ast.AST) -> Summary | None:
        return None


class Counting(Analyzer):
    """Counts the pre-pass's summaries that the recording pass takes."""

    taken = 0

    def _take(self, func: ast.AST) -> Summary | None:
        found = super()._take(func)
        if found is not None:
            self.taken += 1
        return found


def _plain(obj: Any) -> Any:
    """``obj`` with each class of the module named by its node (each analysis has its own
    ``ClassInfo`` objects, and their caches fill as the analysis asks), for comparing two
    analyses of one tree; what the classes' fields hold is compared on its own."""
    if isinstance(obj, ClassInfo):
        return ("class", obj.node)
    if isinstance(obj, (Fact, ast.AST)):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (
            type(obj).__name__,
            *(_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)),
        )
    if isinstance(obj, (list, tuple)):
        return tuple(_plain(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return frozenset(_plain(x) for x in obj)
    return obj


def _analyse(cls: type[Analyzer], tree: ast.Module, raw: bytes, path: Path) -> tuple[Any, ...]:
    config = LintConfig()
    analyzer = cls(
        tree, config.sinks, _segments(raw), lambda text: _triggered(text, config), path.stem
    )
    entries, sinks = analyzer.run()
    exports = analyzer.export((*analyzer.functions, *analyzer.classes), str(path))
    taken = analyzer.taken if isinstance(analyzer, Counting) else 0
    fields = {info.node: (info.attrs, info.attr_defs) for info in analyzer.classes.values()}
    return (
        _plain(entries),
        _plain(sinks),
        analyzer.breakpoint_calls,
        analyzer.wanted,
        exports,
        _plain(fields),
        taken,
    )


def test_kept_summaries_give_what_computing_them_again_gives() -> None:
    assert len(FILES) > 50
    taken = 0
    for path in FILES:
        raw = path.read_bytes()
        # one tree for both: facts name functions by the id of their node
        tree = ast.parse(raw)
        again = _analyse(Recomputing, tree, raw, path)
        kept = _analyse(Counting, tree, raw, path)
        assert kept[:-1] == again[:-1], path
        taken += kept[-1]
    assert taken > 100
