"""Every ``route_reason`` a routing decision can carry is named where docs/proxy.md describes
the log's ``route_reason`` column and where docs/report.md describes
``promptcache_routed_total{reason}``: the reasons are read from the policies' own source (the
second argument of each ``decide(...)`` call, and the router's ``reason="retry"``), so a new
reason cannot reach the log without reaching both pages."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROUTING = ROOT / "proxy" / "routing"


def _strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and type(n.value) is str}


def _reasons() -> set[str]:
    reasons: set[str] = set()
    for path in sorted(ROUTING.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assigned: dict[str, set[str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, set()).update(_strings(node.value))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name == "decide" and len(node.args) >= 2:
                reason = node.args[1]
                if isinstance(reason, ast.Name):
                    reasons |= assigned.get(reason.id, set())
                else:
                    reasons |= _strings(reason)
            reasons |= {
                kw.value.value
                for kw in node.keywords
                if kw.arg == "reason" and isinstance(kw.value, ast.Constant)
            }
    return reasons


def _row(page: str, starts: str) -> str:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith(starts)]
    assert len(rows) == 1, f"docs/{page}: one table row starting {starts!r}, found {len(rows)}"
    return rows[0]


def test_the_policies_reasons_are_read_from_their_source() -> None:
    assert _reasons() >= {"prefix", "new_prefix", "overloaded", "retry", "kv_events", "affinity"}


def test_every_route_reason_is_named_in_the_log_column_and_the_metric() -> None:
    log_row = _row("proxy.md", "| `route_policy`, `route_reason` |")
    metric_row = _row("report.md", "| `promptcache_routed_total` ")
    for reason in sorted(_reasons()):
        assert f"`{reason}`" in log_row, f"docs/proxy.md's route_reason column omits {reason!r}"
        assert f"`{reason}`" in metric_row, f"docs/report.md's routed_total omits {reason!r}"
