# Chat messages built with constant roles: the system instructions first, the newest user
# turn (stamped with the time it was asked) last.
from datetime import datetime

from langchain_core.messages import ChatMessage


def build(system_message: str, query: str, history: list) -> list:
    messages = []
    if system_message:
        messages.append(ChatMessage(content=system_message, role="system"))
    messages += history
    messages.append(ChatMessage(content=f"{query} (asked {datetime.now()})", role="user"))
    for message in messages:
        if isinstance(message.content, str):
            message.content = [{"type": "text", "text": message.content}]
    return messages


def build_dicts(system_message: str, query: str) -> list:
    return [
        {"role": "system", "content": system_message},
        {"role": "user", "content": f"{query} (asked {datetime.now()})"},
    ]


def build_by_kind(system_message: str, query: str, kind: str) -> list:
    # the role of the second message is not a constant: it may be a system message
    return [
        {"role": "system", "content": system_message},
        {"role": kind, "content": f"{query} (asked {datetime.now()})"},
    ]
