"""What one analysis of a module gives, in a form two analyses of the same tree can be compared
by: the tests that check a kept answer (a pre-pass summary, a kept map of argument facts)
changes nothing analyse each module twice and compare the outcomes."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

from promptcache.lint_rules.config import LintConfig
from promptcache.lint_rules.facts import Fact
from promptcache.lint_rules.runner import _segments, _triggered
from promptcache.lint_rules.taint import Analyzer, ClassInfo

ROOT = Path(__file__).resolve().parents[2]
#: every test program and the linter's own modules (real classes whose methods read, store and
#: call each other)
FILES = sorted(
    [*(ROOT / "tests" / "lint" / "programs").rglob("*.py"), *(ROOT / "lint_rules").rglob("*.py")]
)


def plain(obj: Any) -> Any:
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
            *(plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)),
        )
    if isinstance(obj, (list, tuple)):
        return tuple(plain(x) for x in obj)
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return frozenset(plain(x) for x in obj)
    return obj


def analyse(
    cls: type[Analyzer], tree: ast.Module, raw: bytes, path: Path
) -> tuple[tuple[Any, ...], Analyzer]:
    """Analyse ``tree`` (parsed from ``raw``, the bytes of ``path``) with ``cls``: its prefix
    entries, sink calls, breakpoint calls, wanted names, exports and class fields, and the
    analyzer itself (for what a subclass counted)."""
    config = LintConfig()
    analyzer = cls(
        tree, config.sinks, _segments(raw), lambda text: _triggered(text, config), path.stem
    )
    entries, sinks = analyzer.run()
    exports = analyzer.export((*analyzer.functions, *analyzer.classes), str(path))
    fields = {info.node: (info.attrs, info.attr_defs) for info in analyzer.classes.values()}
    outcome = (
        plain(entries),
        plain(sinks),
        analyzer.breakpoint_calls,
        analyzer.wanted,
        exports,
        plain(fields),
    )
    return outcome, analyzer
