"""A chat app that rebuilds its export for every request: the start time is stamped on the
session, beside the fields the builders read (silent); a note holding the time is read by
one of them (found)."""

from datetime import datetime

import openai
from models import AgentState, Export, Session
from prompts import from_agent_prompt, from_note, from_session_id

client = openai.OpenAI()


def build_export(prompt: str, note: str) -> Export:
    session = Session(session_id="s-1", started_at=datetime.now(), agent=AgentState(prompt))
    return Export(session=session, note=note)


def ask(question: str) -> str:
    export = build_export("You are terse.", "saved")
    messages = [from_session_id(export), from_agent_prompt(export)]
    messages.append({"role": "user", "content": question})
    reply = client.chat.completions.create(model="m", messages=messages)
    return reply.choices[0].message.content


def ask_with_note(question: str) -> str:
    export = build_export("You are terse.", f"saved at {datetime.now():%H:%M:%S}")
    messages = [from_note(export), {"role": "user", "content": question}]  # PC001: 16
    reply = client.chat.completions.create(model="m", messages=messages)
    return reply.choices[0].message.content
