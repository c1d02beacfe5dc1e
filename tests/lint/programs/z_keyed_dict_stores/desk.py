# A desk agent reads other keys of the context after a helper stamped one of them.
import datetime

import anthropic
from clock import stamp_call, stamp_flat

client = anthropic.Anthropic()


class Desk:
    def __init__(self, context: dict):
        self.context = context

    def greet(self, question: str):
        stamp_call(self.context)
        zone = self.context["caller"]["timezone"]
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            system=f"Reply in the caller's zone {zone}.",
            messages=[{"role": "user", "content": question}],
        )

    def greet_flat(self, question: str):
        stamp_flat(self.context)
        event = self.context.get("last_event")
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            system=f"Last event: {event}.",
            messages=[{"role": "user", "content": question}],
        )


class Counter:
    """The same reads of the stamped keys themselves, or of the whole context (one class per
    shape: a time stored into a field by one method's call is read as once per session by
    the others)."""

    def __init__(self, context: dict):
        self.context = context

    def greet_stamped(self, question: str):
        stamp_call(self.context)
        started = self.context["caller"]["started_at"]
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            system=f"The call started at {started}.",  # PC001: 42
            messages=[{"role": "user", "content": question}],
        )


class Whole:
    def __init__(self, context: dict):
        self.context = context

    def greet_whole(self, question: str):
        stamp_flat(self.context)
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            system=f"Context: {self.context}",  # PC001: 31
            messages=[{"role": "user", "content": question}],
        )


def answer(question: str, notes: dict):
    notes["today"] = datetime.datetime.now().isoformat()
    topic = notes.get("topic")
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Topic: {topic}",
        messages=[{"role": "user", "content": question}],
    )


def answer_dated(question: str, notes: dict):
    notes["today"] = datetime.datetime.now().isoformat()
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Today: {notes['today']}",  # PC001: 25
        messages=[{"role": "user", "content": question}],
    )
