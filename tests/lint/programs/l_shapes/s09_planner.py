# Shape 9: a uuid passed as a keyword into a planner whose output becomes tool names.
import uuid

import anthropic

from planner import Planner, plan_tools

client = anthropic.Anthropic()
NAMES = ["search", "fetch"]


def ask(question: str):
    tools = plan_tools(NAMES, run_id=uuid.uuid4().hex)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        tools=tools,  # PC002: 14
        messages=[{"role": "user", "content": question}],
    )


def ask_labelled(question: str):
    tools = plan_tools(NAMES, run_id="v1", label=uuid.uuid4().hex)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        tools=tools,
        messages=[{"role": "user", "content": question}],
    )


def ask_planned(question: str):
    planner = Planner(run_id=uuid.uuid4().hex)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        tools=planner.tools(NAMES),  # PC002: 14
        messages=[{"role": "user", "content": question}],
    )
