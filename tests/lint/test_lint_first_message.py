"""PC001 through an adapter that sends the first message of its caller's list as the system
text (``fixtures/PC001_first_message.py``; its markers, the findings, are checked by
``test_lint_fixtures``): where the list's first element is not known, a time in the user's
turn is an unproven flow, shown by ``--explain`` with the step it is not shown to take."""

from __future__ import annotations

from lint_markers import FIXTURES, expected_markers, lint_fixture

FIXTURE = FIXTURES / "PC001_first_message.py"
#: the calls whose list's first element is not known: a history appended to, and
#: ``[system, *history, user]``
UNKNOWN_FIRST_LINES = {57, 62}


def test_a_user_turn_of_a_list_of_unknown_first_element_is_an_unproven_flow() -> None:
    source, result = lint_fixture(FIXTURE)
    notes = {d.location.line for d in result.notes if d.code == "PC001"}
    assert notes == UNKNOWN_FIRST_LINES
    assert not notes & {line for line, _, _ in expected_markers(source)}
    step = "assumed to pass through [0] of a list whose first message is not known"
    for note in result.notes:
        related = [(r.location.line, r.message) for r in note.related]
        line = note.location.line
        assert related == [
            (line - 1, f"datetime.now() is born here, {step}"),
            (line, f"`[0]` passes it on: {step}"),
        ]


def test_a_list_that_begins_with_the_system_message_sends_no_later_turn() -> None:
    source, result = lint_fixture(FIXTURE)
    lines = {d.location.line for d in result.diagnostics} | {d.location.line for d in result.notes}
    # chat_loop's history starts from [system] and appends the user's timed turn in a loop
    assert 51 not in lines
    assert "datetime.now().isoformat()" in source.splitlines()[50]
