"""The whole-program fixpoint keeps every name a file's analyses wanted: a summary passed can
make the next analysis stop wanting the name, and dropping the summary then would make the one
after want it again, so the file would flip between two analyses every wave until its cap."""

from __future__ import annotations

from promptcache.lint_rules.analysis.program import FileState, _wanted_names


def _analysed(state: FileState, wanted: dict[str, bool]) -> list[tuple[str, bool]]:
    state.output = {"wanted": wanted}
    return _wanted_names(state)


def test_a_name_no_longer_wanted_stays_wanted() -> None:
    state = FileState("examples.process_output", False)
    first = _analysed(state, {"agent.views.AgentHistoryList": False, "agent.run": False})
    assert first == [("agent.views.AgentHistoryList", False), ("agent.run", False)]
    # the summary of AgentHistoryList resolved the name: the next analysis does not want it
    second = _analysed(state, {"agent.run": False})
    assert second == [("agent.run", False), ("agent.views.AgentHistoryList", False)]
    # so the names, and the summaries passed for them, are the same at the third analysis
    third = _analysed(state, {"agent.views.AgentHistoryList": False, "agent.run": False})
    assert sorted(third) == sorted(second)


def test_the_latest_names_come_first_in_their_order() -> None:
    state = FileState("app", False)
    _analysed(state, {"a.f": False, "b.g": False})
    assert _analysed(state, {"c.h": False, "b.g": False}) == [
        ("c.h", False),
        ("b.g", False),
        ("a.f", False),
    ]


def test_a_name_once_passed_a_value_with_facts_stays_carried() -> None:
    state = FileState("app", False)
    _analysed(state, {"clock.now_text": True})
    assert _analysed(state, {"clock.now_text": False}) == [("clock.now_text", True)]
    assert _analysed(state, {}) == [("clock.now_text", True)]
