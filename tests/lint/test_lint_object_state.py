"""State an ``__init__``-like method builds once per object is the object's for its life,
whether the method stores it outright or fills it in a ``for`` loop (an id per tool, a
time per loaded item, into a field or into a local that a field then takes): a request that
sends it later is not told it changes per request. A ``while`` loop in ``__init__`` (which
may serve requests), a request sent inside the method's own loop, and the same loop in a
method run per request are still reported."""

from __future__ import annotations

from promptcache.lint_rules import Severity, lint_source

ASK = """

    def ask(self, question):
        return client.chat.completions.create(
            model="gpt-4o",
            messages=[
                {"role": "system", "content": self.system},
                {"role": "user", "content": question},
            ],
        )


agent = Agent(["search", "calc"])
while True:
    agent.ask(input())
"""

HEAD = """
import time
import uuid

import openai

client = openai.OpenAI()


class Agent:
"""

#: ``__init__`` bodies that build the object's system text once
ONCE = {
    "ids_in_a_field": """
    def __init__(self, tools):
        self.ids = {}
        for tool in tools:
            self.ids[tool] = uuid.uuid4().hex
        self.system = "Tools: " + ", ".join(f"{k}={v}" for k, v in self.ids.items())
""",
    "times_in_a_local": """
    def __init__(self, tools):
        lines = []
        for tool in tools:
            lines.append(f"{tool} loaded at {time.time()}")
        self.system = "\\n".join(lines)
""",
    "appended_to_a_field": """
    def __init__(self, tools):
        self.lines = []
        for tool in tools:
            self.lines.append(f"{tool}: {uuid.uuid4()}")
        self.system = "\\n".join(self.lines)
""",
}


def findings(source: str) -> list[tuple[str, int, Severity]]:
    result = lint_source(source, "app.py")
    return sorted((d.code, d.location.line, d.severity) for d in result.diagnostics)


def test_state_filled_in_a_loop_of_init_is_the_objects() -> None:
    for name, init in ONCE.items():
        assert findings(HEAD + init + ASK) == [], name


def test_a_straight_line_init_is_the_objects_as_well() -> None:
    init = """
    def __init__(self, tools):
        self.system = f"Agent {uuid.uuid4()}"
"""
    assert findings(HEAD + init + ASK) == []


def test_the_same_loop_in_a_method_run_per_request_is_reported() -> None:
    source = (
        HEAD
        + """
    def __init__(self, tools):
        self.tools = tools
        self.ids = {}

    def ask(self, question):
        for tool in self.tools:
            self.ids[tool] = uuid.uuid4().hex
        system = "Tools: " + ", ".join(f"{k}={v}" for k, v in self.ids.items())
        return client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
        )
"""
    )
    assert findings(source) == [("PC002", 22, Severity.ERROR)]


def test_a_request_sent_in_a_loop_of_init_is_reported() -> None:
    """Each pass of a ``for`` loop that sends is a request, and a ``while`` loop in
    ``__init__`` may serve them: what either makes per pass changes per request."""
    source = (
        HEAD
        + """
    def __init__(self, questions):
        self.history = []
        for question in questions:
            self.history.append({"role": "system", "content": f"now {time.time()}"})
            self.history.append({"role": "user", "content": question})
            client.chat.completions.create(model="gpt-4o", messages=self.history)


class Server:
    def __init__(self):
        self.lines = []
        while True:
            self.lines.append(f"now {time.time()}")
            client.chat.completions.create(
                model="gpt-4o",
                messages=[
                    {"role": "system", "content": "\\n".join(self.lines)},
                    {"role": "user", "content": input()},
                ],
            )
"""
    )
    assert findings(source) == [("PC001", 15, Severity.ERROR), ("PC001", 28, Severity.ERROR)]


def test_a_loop_of_init_that_sends_through_a_method_is_reported() -> None:
    """A ``for`` loop of ``__init__`` that stores a field and then sends a request on each
    pass, directly or through a method of the object, stores a new value before each
    request: per request, not the object's state. The look-alike loop calls a method that
    sends nothing (it only registers each tool): its stores are the object's."""
    source = (
        HEAD
        + """
    def __init__(self, questions):
        for question in questions:
            self.system = f"now {time.time()}"
            self.ask(question)
"""
        + ASK
    )
    # where the request reads the field, and where the program's call sends it
    assert findings(source) == [("PC001", 22, Severity.ERROR), ("PC001", 30, Severity.ERROR)]
    direct = (
        HEAD
        + """
    def __init__(self, questions):
        self.stamps = {}
        for question in questions:
            self.stamps[question] = f"now {time.time()}"
            client.chat.completions.create(
                model="gpt-4o",
                messages=[
                    {"role": "system", "content": self.stamps[question]},
                    {"role": "user", "content": question},
                ],
            )
"""
    )
    assert findings(direct) == [("PC001", 19, Severity.ERROR)]
    quiet = (
        HEAD
        + """
    def __init__(self, tools):
        self.ids = {}
        for tool in tools:
            self.ids[tool] = uuid.uuid4().hex
            self.register(tool)
        self.system = "Tools: " + ", ".join(f"{k}={v}" for k, v in self.ids.items())

    def register(self, tool):
        self.ids.setdefault(tool, "")
"""
        + ASK
    )
    assert findings(quiet) == []
