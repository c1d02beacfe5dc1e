# ... passed to a sink in module B (agent constructors included)
import time

import openai
from agents import Agent

from app.prompts import current_context, stable_rules
from app.prompts.context import dated_rules, passthrough

from ..prompts import context as ctx

client = openai.OpenAI()


def support_agent() -> Agent:
    return Agent(name="support", instructions="Help. " + current_context())  # PC001: 57


def dated_agent() -> Agent:
    return Agent(name="dated", instructions=dated_rules())  # PC001: 44


def stable_agent() -> Agent:
    return Agent(name="stable", instructions=stable_rules())


def relative(question: str):
    return client.chat.completions.create(
        model="gpt-5",
        messages=[
            {"role": "system", "content": ctx.current_context()},  # PC001: 42
            {"role": "user", "content": question},
        ],
    )


def passed_through(question: str):
    # the time argument is not part of what passthrough() returns
    return client.chat.completions.create(
        model="gpt-5",
        messages=[
            {"role": "system", "content": passthrough("Rules.", time.time())},
            {"role": "user", "content": question},
        ],
    )


def keyed(question: str):
    return client.chat.completions.create(
        model="gpt-5",
        messages=[{"role": "user", "content": question}],
        prompt_cache_key=ctx.session_id(),  # PC013: 25
    )
