# The instructions sent are written from the task, which is stamped with the time it came in.
from datetime import datetime

import anthropic

from .prompts import generated, headline

client = anthropic.Anthropic()


def ask_generated(task: str, model):
    instructions = generated(f"{task} (received {datetime.now()})", model)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=instructions,
        messages=[{"role": "user", "content": task}],
    )


def ask_headline(task: str):
    instructions = headline(f"{task} (received {datetime.now()})")  # PC001: 19
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=instructions,
        messages=[{"role": "user", "content": task}],
    )
