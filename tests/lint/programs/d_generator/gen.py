# d) a sink call inside a generator
from datetime import datetime

import anthropic

client = anthropic.Anthropic()
M = "claude-sonnet-4-5"


def answers(questions):
    for q in questions:
        yield client.messages.create(
            model=M,
            max_tokens=100,
            system=f"Now: {datetime.now():%H:%M:%S}",  # PC001: 27
            messages=[{"role": "user", "content": q}],
        )


def stable_answers(questions):
    for q in questions:
        yield client.messages.create(
            model=M, max_tokens=100, system="Be brief.", messages=[{"role": "user", "content": q}]
        )


def prompts():
    yield f"Now: {datetime.now():%H:%M:%S}"


def from_generator(question: str):
    for system in prompts():
        return client.messages.create(
            model=M, max_tokens=100, system=system, messages=[{"role": "user", "content": question}]  # PC001: 44
        )
