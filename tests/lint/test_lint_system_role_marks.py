"""PC007 and a loop that marks only the system messages of a list.

``for msg in messages: if msg["role"] == "system": <mark>`` sets one breakpoint on the one
system message a request holds, so it is not counted per element, unless the module itself
makes system messages that may pile up in a list (then the loop is reported as any other
marking loop). Each case below is one module: the marking loop, then how the module makes its
system messages. The fixtures ``PC007_system_role_*.py`` hold the loop's own shapes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from promptcache.lint_rules import lint_source
from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES

_LOOP = """\
def cache_system(messages):
    for msg in messages:
        if msg["role"] == "system":
            msg["cache_control"] = {"type": "ephemeral"}
    return messages
"""

#: system messages held once: at the head of the list a request is built from
HELD_ONCE = {
    "no_system_message": "",
    "head_of_display": """
def build(history, system, question):
    return [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]
""",
    "head_of_concatenation": """
def build(history, system):
    return [{"role": "system", "content": system}] + history
""",
    "rebuilt_each_turn": """
def run(history, system, ask):
    while True:
        messages = [{"role": "system", "content": system}, *history]
        history.append({"role": "assistant", "content": ask(cache_system(messages))})
""",
    "fresh_local_list": """
def build(history, system):
    messages = []
    messages.append({"role": "system", "content": system})
    messages.extend(history)
    return messages
""",
    "local_name_at_head": """
def build(history, system):
    system_message = {"role": "system", "content": system}
    return [system_message, *history]
""",
    "helper_result_at_head": """
class Agent:
    def _system(self):
        return {"role": "system", "content": "You help."}

    def build(self):
        return [self._system(), *self.history]
""",
    "field_at_head": """
class Agent:
    def __init__(self):
        self.system_message = {"role": "system", "content": "You help."}

    def build(self):
        return [self.system_message, *self.history]
""",
    "role_from_a_name_never_system": """
class Agent:
    def add(self, role, content):
        self.history.append({"role": role, "content": content})

    def ask(self, question):
        self.add("user", question)
""",
}

#: system messages that may pile up in one list: the loop marks one per element
PILED_UP = {
    "appended_to_history": """
class Agent:
    def note(self, text):
        self.history.append({"role": "system", "content": text})
""",
    "inserted_into_a_parameter": """
def build(messages, system):
    messages.insert(0, {"role": "system", "content": system})
    return messages
""",
    "concatenated_to_the_field": """
class Agent:
    def note(self, text):
        self.history = self.history + [{"role": "system", "content": text}]
""",
    "after_the_history": """
def note(history, text):
    return [*history, {"role": "system", "content": text}]
""",
    "prepended_to_itself": """
def run(history, system):
    history = [{"role": "system", "content": system}] + history
    return history
""",
    "made_in_a_comprehension": """
def build(notes):
    return [{"role": "system", "content": note} for note in notes]
""",
    "made_in_a_loop": """
def build(notes, history):
    for note in notes:
        history.append({"role": "system", "content": note})
""",
    "local_name_appended": """
class Agent:
    def note(self, text):
        message = {"role": "system", "content": text}
        self.history.append(message)
""",
    "helper_result_appended": """
class Agent:
    def _system(self, text):
        return {"role": "system", "content": text}

    def note(self, text):
        self.history.append(self._system(text))
""",
    "field_appended_each_turn": """
class Agent:
    def __init__(self):
        self.system_message = {"role": "system", "content": "You help."}

    def turn(self):
        self.history.append(self.system_message)
""",
    "handed_to_another_call": """
class Agent:
    def note(self, text):
        self.remember({"role": "system", "content": text})
""",
    "role_from_a_name_given_system": """
class Agent:
    def add(self, role, content):
        self.history.append({"role": role, "content": content})

    def tool(self, output):
        self.add("system", output)
""",
    "role_constant": """
class Agent:
    def note(self, text):
        self.history.append({"role": Role.SYSTEM, "content": text})
""",
    "system_message_class": """
class Agent:
    def note(self, text):
        self.history.append(SystemMessage(content=text))
""",
}


def _flagged(source: str) -> list[int]:
    config = parse_table({"select": ["PC007"]}, Path("."), KNOWN_CODES)
    return [d.location.line for d in lint_source(source, "app.py", config).diagnostics]


@pytest.mark.parametrize("case", sorted(HELD_ONCE))
def test_system_messages_held_once_leave_the_loop_quiet(case: str) -> None:
    assert _flagged(_LOOP + HELD_ONCE[case]) == []


@pytest.mark.parametrize("case", sorted(PILED_UP))
def test_system_messages_that_pile_up_keep_the_loop_reported(case: str) -> None:
    assert _flagged(_LOOP + PILED_UP[case]) == [4]
