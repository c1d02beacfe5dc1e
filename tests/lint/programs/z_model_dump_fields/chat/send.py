# A model of another module built here and dumped with pydantic's `model_dump()` is a dict of
# its fields, each holding what was stored into it: a time stored into the content of a dumped
# message and read back under "content" into the system message is found (PC001). Beside it:
# a dumped message of a literal system role (found where the message is built), the newest user
# turn dumped whole, and a note whose time is in a field the system message does not read.
# `model_dump_json()` is the same fields as JSON text: a note dumped whole into the system
# message carries its time (found); dumped without its time field (`exclude=`) it does not.
from datetime import datetime

import openai

from .models import ChatMessage, Note

client = openai.OpenAI()


def ask_with_dumped_content(question: str):
    now = datetime.now().strftime("%H:%M:%S")
    note = ChatMessage(role="user", content=f"Now: {now}.").model_dump()
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": note["content"]},  # PC001: 42
            {"role": "user", "content": question},
        ],
    )


def ask_with_dumped_system(question: str):
    now = datetime.now().strftime("%H:%M:%S")
    system = ChatMessage(role="system", content=f"Now: {now}.").model_dump()  # PC001: 56
    return client.chat.completions.create(
        model="gpt-4o", messages=[system, {"role": "user", "content": question}]
    )


def ask_with_dumped_user_turn(question: str):
    now = datetime.now().strftime("%H:%M:%S")
    turn = ChatMessage(role="user", content=f"{question} (asked at {now})").model_dump()
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "You answer questions."}, turn],
    )


def ask_with_dumped_note(question: str):
    note = Note(content="Answer briefly.", created_at=datetime.now()).model_dump()
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": note["content"]},
            {"role": "user", "content": question},
        ],
    )


def ask_with_note_json(question: str):
    note = Note(content="Answer briefly.", created_at=datetime.now())
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": note.model_dump_json()},  # PC001: 42
            {"role": "user", "content": question},
        ],
    )


def ask_with_note_json_without_time(question: str):
    note = Note(content="Answer briefly.", created_at=datetime.now())
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": note.model_dump_json(exclude={"created_at"})},
            {"role": "user", "content": question},
        ],
    )
