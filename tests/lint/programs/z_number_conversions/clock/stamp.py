# Numbers and in-memory streams made from the time keep the time: `int(time.time())`,
# `round(...)`, the first line of an `io.StringIO` built from a time's text. A time handed to a
# library function the linter cannot see (what `humanize` writes) is an unproven flow, and a
# count of the seconds' digits (`len`) holds no time.
import io
import time
from datetime import datetime

import anthropic
import humanize

client = anthropic.Anthropic()


def ask_with_seconds(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Request {int(time.time())}. Be brief.",  # PC001: 26
        messages=[{"role": "user", "content": question}],
    )


def ask_with_rounded(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Clock {round(time.time(), 1)}. Be brief.",  # PC001: 24
        messages=[{"role": "user", "content": question}],
    )


def ask_with_stream(question: str):
    header = io.StringIO(f"Now: {datetime.now()}\nBe brief.\n")
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=header.readline(),  # PC001: 15
        messages=[{"role": "user", "content": question}],
    )


def ask_with_phrase(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Started {humanize.naturaltime(datetime.now())}. Be brief.",
        messages=[{"role": "user", "content": question}],
    )


def ask_with_digits(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Clocks here have {len(str(int(time.time())))} digits. Be brief.",
        messages=[{"role": "user", "content": question}],
    )
