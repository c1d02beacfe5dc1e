"""The fixpoint's schedule when every due file waits on another: the import cycles that wait on
no other due file run first (``program._source_cycles``), checked against a brute-force count
of reachability on random graphs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from promptcache.lint_rules.analysis.program import _source_cycles


def _reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _brute_force(edges: dict[str, set[str]]) -> set[str]:
    """A node is in a source cycle when every node it waits on, directly or not, waits on it
    in turn: what it reaches is its own strongly connected component."""
    reach = {node: _reachable(edges, node) for node in edges}
    return {node for node in edges if all(node in reach[other] for other in reach[node])}


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, set[str]]:
    names = [f"m{i}.py" for i in range(draw(st.integers(1, 9)))]
    return {
        name: set(draw(st.lists(st.sampled_from(names), max_size=4))) - {name} for name in names
    }


@given(graphs())
def test_source_cycles_match_reachability(edges: dict[str, set[str]]) -> None:
    found = _source_cycles(edges)
    assert found == _brute_force(edges)
    assert found


def test_a_cycle_waiting_on_another_cycle_runs_after_it() -> None:
    # a <-> b wait on each other and on c; c <-> d wait only on each other
    edges = {"a": {"b", "c"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}
    assert _source_cycles(edges) == {"c", "d"}


def test_cycles_that_wait_on_nothing_else_all_run() -> None:
    edges = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}, "e": {"a", "c"}}
    assert _source_cycles(edges) == {"a", "b", "c", "d"}
