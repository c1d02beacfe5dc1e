# A value used only as a key or a path taints nothing: the hook texts stored under a uuid7
# thread id, and the files of a folder named by a uuid4, are not the id.
from pathlib import Path
from uuid import uuid4, uuid7

import anthropic

from context import add_context, tagged_context, take_pending_context

client = anthropic.Anthropic()


def answer(question: str):
    thread_id = str(uuid7())
    add_context(thread_id, "The user prefers short answers.")
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"You are helpful.\n{take_pending_context(thread_id)}",
        messages=[{"role": "user", "content": question}],
    )


def answer_tagged(question: str):
    thread_id = str(uuid7())
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"You are helpful.\n{tagged_context(thread_id)}",  # PC002: 36
        messages=[{"role": "user", "content": question}],
    )


def subagent(root: Path):
    folder = root / f"assistant-{uuid4().hex}"
    prompt = (folder / "AGENTS.md").read_text()
    with open(folder / "rules.md") as fh:
        rules = fh.read()
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=prompt + rules,
        messages=[{"role": "user", "content": "go"}],
    )


def subagent_named(root: Path):
    folder = root / f"assistant-{uuid4().hex}"  # PC002: 13
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Your files are in {folder}. " + (folder / "AGENTS.md").read_text(),
        messages=[{"role": "user", "content": "go"}],
    )
