"""What a caller's argument facts become for a callee's parameter fact (``calls.CallsMixin.passed``)
is kept for the rest of the analysis (``passed_memo``), and so is, for one call, what each
parameter fact named in a summary becomes: a module analysed so gives the same prefix entries,
sink calls, breakpoint calls, wanted names and exports as when each is computed afresh. Run on
every test program and on the linter's own modules, and the kept answers must be used."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

from promptcache.lint_rules.calls import with_grain
from promptcache.lint_rules.config import LintConfig
from promptcache.lint_rules.facts import Fact, Step, passed_role
from promptcache.lint_rules.runner import _segments, _triggered
from promptcache.lint_rules.taint import Analyzer, ClassInfo

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    [*(ROOT / "tests" / "lint" / "programs").rglob("*.py"), *(ROOT / "lint_rules").rglob("*.py")]
)


class Afresh(Analyzer):
    """Computes each ``passed`` answer again, keeping none."""

    def passed(
        self, given: frozenset[Fact], grain: str, steps: tuple[Step, ...], role: str
    ) -> frozenset[Fact]:
        out = with_grain(given, grain)
        if steps:
            out = self.unproven_all(out, steps)
        return passed_role(out, role)


class Counting(Analyzer):
    """Counts the ``passed`` answers found kept."""

    hits = 0

    def passed(
        self, given: frozenset[Fact], grain: str, steps: tuple[Step, ...], role: str
    ) -> frozenset[Fact]:
        if (given, grain, steps, role) in self.passed_memo:
            self.hits += 1
        return super().passed(given, grain, steps, role)


def _plain(obj: Any) -> Any:
    """``obj`` with each class of the module named by its node (each analysis has its own
    ``ClassInfo`` objects), for comparing two analyses of one tree."""
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
    hits = analyzer.hits if isinstance(analyzer, Counting) else 0
    fields = {info.node: (info.attrs, info.attr_defs) for info in analyzer.classes.values()}
    return (
        _plain(entries),
        _plain(sinks),
        analyzer.breakpoint_calls,
        analyzer.wanted,
        exports,
        _plain(fields),
        hits,
    )


def test_kept_answers_give_what_computing_them_again_gives() -> None:
    assert len(FILES) > 50
    hits = 0
    for path in FILES:
        raw = path.read_bytes()
        # one tree for both: facts name functions by the id of their node
        tree = ast.parse(raw)
        again = _analyse(Afresh, tree, raw, path)
        kept = _analyse(Counting, tree, raw, path)
        assert kept[:-1] == again[:-1], path
        hits += kept[-1]
    assert hits > 100
