"""A history list that only grows, each record stamped once when it is appended and the whole
list rendered into every later request: the stamp (a time, an id, a set's repr) is written
once, and each request's text extends the one before it, so no cached prefix is lost to it.

The linter proves this nowhere yet. Where the class that stamps the record also sends the
history, the time and id are quiet for another reason (a field stored by one method and read
by another that neither calls, ``session.kept_from_session``), which does not cover a set's
repr and does not reach a class that reads the list through an object it holds
(``self.executor.history``); there the caller's analysis follows the store before each call,
as it must for a field stamped again (tests/lint/fixtures/PC001_held_history_stamps.py). The
quiet sides run as strict xfails: flip them once the proof exists (it needs both the writes
of the field, appends only, and the reader's use of it, the whole list in order)."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptcache.lint_rules import lint_source
from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES

_HEAD = """import json
import uuid
from datetime import datetime, timezone

import anthropic

client = anthropic.Anthropic()
"""

HELD_READER = (
    _HEAD
    + """

class PhaseExecutor:
    def __init__(self, executor):
        self.executor = executor

    def execute_phase(self, goal):
        system = "Decide the next action.\\nHistory:\\n" + json.dumps(self.executor.history)
        return client.messages.create(
            model="m", max_tokens=200, system=system,
            messages=[{"role": "user", "content": goal}],
        )


class PlanExecutor:
    def __init__(self):
        self.history = []
        self.goals = []

    def _log_system_event(self, event):
        action = {"metadata": {"timestamp": datetime.now(timezone.utc).isoformat()}}
        self.history.append({"action": action, "result": event})

    def run(self):
        phase_executor = PhaseExecutor(self)
        for goal in self.goals:
            self._log_system_event({"step": "phase start"})
            phase_executor.execute_phase(goal)
"""
)

SET_IN_RECORD = (
    _HEAD
    + """

class Agent:
    def __init__(self):
        self.history = []

    def log(self, step: str, missing: set[str]) -> None:
        self.history.append({
            "step": step,
            "details": f"missing arguments: {missing}",
            "call_id": str(uuid.uuid4()),
            "timestamp": datetime.now(timezone.utc).isoformat(),
        })

    def next_action(self):
        system = "Decide the next action.\\nHistory:\\n" + json.dumps(self.history)
        return client.messages.create(
            model="m", max_tokens=200, system=system,
            messages=[{"role": "user", "content": "Next action?"}],
        )

    def run(self):
        for _ in range(10):
            action = self.next_action()
            self.log(action, {"database", "table"})
"""
)

FRESH_SET = (
    _HEAD
    + """

def ask(question, missing):
    system = f"Decide the next action. Missing arguments: {set(missing)}"
    return client.messages.create(
        model="m", max_tokens=200, system=system,
        messages=[{"role": "user", "content": question}],
    )
"""
)


def _codes(source: str) -> list[str]:
    config = parse_table({"select": ["ALL"]}, Path("."), KNOWN_CODES)
    result = lint_source(source, "app.py", config)
    return sorted(d.code for d in result.diagnostics)


@pytest.mark.xfail(strict=True, reason="no proof of a record stamped once into a grown history")
def test_history_read_through_a_held_object_is_quiet() -> None:
    assert _codes(HELD_READER) == []


@pytest.mark.xfail(strict=True, reason="no proof of a record stamped once into a grown history")
def test_set_repr_written_once_into_a_history_record_is_quiet() -> None:
    assert _codes(SET_IN_RECORD) == []


def test_what_the_quiet_sides_report_today() -> None:
    """Today's findings on the quiet sides: the time through the held object, the set's repr
    in one class (its time and id are quiet there)."""
    assert _codes(HELD_READER) == ["PC001"]
    assert _codes(SET_IN_RECORD) == ["PC015"]


def test_a_set_made_for_each_request_is_reported() -> None:
    assert _codes(FRESH_SET) == ["PC015"]
