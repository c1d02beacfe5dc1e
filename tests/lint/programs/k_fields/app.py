from datetime import datetime

import anthropic

from model import Assistant, Note, State

client = anthropic.Anthropic()


def ask(question: str):
    notes = [Note(text="likes tea", created_at=datetime.now().isoformat())]
    helper = Assistant("Be brief.", State("Earlier: tea.", notes))
    return client.messages.create(
        model="m",
        max_tokens=10,
        system=helper.system_text(),
        messages=[{"role": "user", "content": question}],
    )


def ask_stamped(question: str):
    helper = Assistant("Be brief.", State(f"as of {datetime.now():%H:%M}", []))
    return client.messages.create(
        model="m",
        max_tokens=10,
        system=helper.stamped_text(),  # PC001: 15
        messages=[{"role": "user", "content": question}],
    )


def ask_note(question: str):
    note = Note(text="likes tea", created_at=datetime.now().isoformat())
    return client.messages.create(
        model="m",
        max_tokens=10,
        system=f"Remember: {note.text}",
        messages=[{"role": "user", "content": question}],
    )


def ask_note_time(question: str):
    note = Note(text="likes tea", created_at=datetime.now().isoformat())
    return client.messages.create(
        model="m",
        max_tokens=10,
        system=f"Noted at {note.created_at}",  # PC001: 27
        messages=[{"role": "user", "content": question}],
    )


def ask_render(question: str, render):
    # a function we cannot see, given the whole object: its fields do not flow into the result
    helper = Assistant("Be brief.", State("s", [Note("x", datetime.now().isoformat())]))
    return client.messages.create(
        model="m",
        max_tokens=10,
        system=render(helper),
        messages=[{"role": "user", "content": question}],
    )
