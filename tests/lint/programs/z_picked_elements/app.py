"""System prompts made of one entry picked from a list in filesystem order (its order decides
only between equal candidates) and of every entry listed in that order."""

from __future__ import annotations

from datetime import datetime

import anthropic
from catalog import (
    ENTRIES,
    Entry,
    added,
    best_for,
    by_task,
    concatenated,
    first_for,
    first_lines,
    first_of,
    greatest_content,
    keyed_content,
    last_of,
    last_skipping,
    listed,
    longest,
    next_content,
    next_for,
    numbered,
    shortest,
)

client = anthropic.Anthropic()


def _send(system: str, question: str):
    return client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=512,
        system=system,
        messages=[{"role": "user", "content": question}],
    )


def ask_best(model: str, question: str):
    return _send(best_for("qa", model, ENTRIES).content, question)


def ask_first(question: str):
    return _send(first_for("qa", ENTRIES).content, question)


def ask_next(question: str):
    return _send(next_for("qa", ENTRIES).content, question)


def ask_longest(question: str):
    return _send(longest(ENTRIES).content + shortest(ENTRIES).content, question)


def ask_keyed(task: str, question: str):
    return _send(by_task(ENTRIES)[task].content, question)


def ask_stamped(model: str, question: str):
    stamped = [*ENTRIES, Entry("clock", [], f"Now: {datetime.now():%H:%M}")]
    return _send(best_for("clock", model, stamped).content, question)  # PC001: 17


def ask_listed(question: str):
    return _send(listed(ENTRIES), question)  # PC004: 17


def ask_concatenated(question: str):
    return _send(concatenated(ENTRIES), question)  # PC004: 17


def ask_added(question: str):
    return _send(added(ENTRIES), question)  # PC004: 17


def ask_numbered(question: str):
    return _send(numbered(ENTRIES), question)  # PC004: 17


def ask_first_lines(question: str):
    return _send(first_lines(ENTRIES), question)  # PC004: 17


def ask_next_content(question: str):
    return _send(next_content("qa", ENTRIES), question)


def ask_greatest(question: str):
    return _send(greatest_content(ENTRIES), question)


def ask_keyed_content(question: str):
    return _send(keyed_content(ENTRIES), question)


def ask_last(question: str):
    return _send(last_of(ENTRIES), question)  # PC004: 17


def ask_first_of(question: str):
    return _send(first_of(ENTRIES), question)  # PC004: 17


def ask_last_skipping(question: str):
    return _send(last_skipping("qa", ENTRIES), question)
