# A message list built by a fixed sequence of appends: reading index 0 gives the first
# message only, so the history appended after it does not reach the instructions.
import json
from datetime import datetime

import openai

client = openai.OpenAI()


def build(question: str, calls: list[dict]) -> list[dict]:
    messages = []
    messages.append({"role": "system", "content": "Answer briefly."})
    messages.append({"role": "user", "content": f"{question} (asked {datetime.now()})"})
    for call in calls:
        messages.append({"role": "assistant", "content": json.dumps(call)})
    return messages


def ask(question: str, calls: list[dict]):
    messages = build(question, calls)
    instructions = messages[0]["content"]
    return client.responses.create(model="gpt-5", instructions=instructions, input=messages[1:])


def ask_literal(question: str):
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": f"{question} (asked {datetime.now()})"},
    ]
    return client.responses.create(
        model="gpt-5", instructions=messages[0]["content"], input=messages[1:]
    )


def ask_stamped(question: str):
    # the look-alike: the time is in the first message
    messages = []
    messages.append({"role": "system", "content": f"Now: {datetime.now():%H:%M}"})  # PC001: 58
    messages.append({"role": "user", "content": question})
    return client.responses.create(
        model="gpt-5", instructions=messages[0]["content"], input=messages[1:]
    )


def ask_reversed(question: str):
    # reversed after the appends: index 0 is no longer known to be the first append
    messages = []
    messages.append({"role": "system", "content": "Answer briefly."})
    messages.append({"role": "user", "content": f"{question} (asked {datetime.now()})"})
    messages.reverse()
    return client.responses.create(
        model="gpt-5", instructions=messages[0]["content"], input=messages[1:]  # PC001: 36
    )
