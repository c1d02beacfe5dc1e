# A stored conversation: the history starts from the database record (elements of unknown
# keys) and gains the question with an id; a new conversation's prologue is stamped with
# the time it was made, in a branch that returns before any request.
import time
from datetime import datetime
from uuid import uuid4

from dialog import agent, chat
from store import Conversation


async def complete(conv_id: str, text: str, system: str, prologue: str):
    if not conv_id:
        first = {"role": "assistant", "content": prologue, "created_at": time.time()}
        conv = {"id": str(uuid4()), "message": [first]}
        Conversation.create(**conv)
        return conv["message"][0]["content"]
    else:
        found, conv = Conversation.get_by_id(conv_id)
    if not conv.message:
        conv.message = []
    messages = conv.message
    question = {"role": "user", "content": text, "id": str(uuid4())}
    messages.append(question)
    msg = []
    for m in messages:
        if m["role"] == "system":
            continue
        if m["role"] == "assistant" and not msg:
            continue
        msg.append(m)
    if not msg[-1].get("id"):
        msg[-1]["id"] = str(uuid4())
    return await agent(system, msg, reasoning=False)


async def complete_stamped(conv_id: str, text: str, system: str):
    # the look-alike: the time is in the question's content
    conv = Conversation.get_by_id(conv_id)
    messages = conv.message
    messages.append({"role": "user", "content": f"{text} (sent {datetime.now():%H:%M:%S})"})
    return await chat(system, messages)  # PC001: 30
