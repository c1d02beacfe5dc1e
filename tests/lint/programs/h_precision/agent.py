# Precision: look-alikes that must stay silent, beside the real per-request conditions.
import random

import anthropic
from agents import Agent

client = anthropic.Anthropic()
TOOLS = [{"name": "search", "input_schema": {}}]
ADMIN_TOOLS = [*TOOLS, {"name": "delete", "input_schema": {}}]


def make_agent(fast: bool) -> Agent:
    # the model is picked once per agent: configuration, not a per-request condition
    return Agent(name="a", model="gpt-5-mini" if fast else "gpt-5", instructions="Help.")


class Chat:
    def __init__(self, admin: bool, model: str | None = None):
        self.tools = ADMIN_TOOLS if admin else TOOLS
        self.model = model if model else "claude-sonnet-4-5"
        self.history: list = []

    def ask(self, question: str):
        self.history.append({"role": "user", "content": question})
        return client.messages.create(
            model=self.model, max_tokens=10, tools=self.tools, messages=self.history
        )


def ask_sentinel(question: str, tools: list | None = None):
    return client.messages.create(
        model="m",
        max_tokens=10,
        tools=tools if tools else None,
        messages=[{"role": "user", "content": question}],
    )


def ask_per_turn(questions: list[str]):
    history: list = []
    for turn, question in enumerate(questions):
        history.append({"role": "user", "content": question})
        client.messages.create(
            model="claude-haiku-4-5" if turn % 2 else "claude-sonnet-4-5",  # PC011: 18
            max_tokens=10,
            tools=TOOLS,
            messages=history,
        )


def ask_random(history: list):
    return client.messages.create(
        model=random.choice(["claude-haiku-4-5", "claude-sonnet-4-5"]),  # PC011: 14
        max_tokens=10,
        messages=history,
    )


def split_pair() -> tuple[str, float]:
    import time

    return "Be brief.", time.time()


def ask_tuple(question: str):
    rules, started = split_pair()
    return client.messages.create(
        model="m", max_tokens=10, system=rules, messages=[{"role": "user", "content": question}]
    )
