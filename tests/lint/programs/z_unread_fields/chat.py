import time
from uuid import uuid4

import openai

client = openai.OpenAI()

SYSTEM_TEMPLATE = "You answer questions about the library.\n{knowledge}"


def send(system: str, messages: list):
    questions = [m["content"] for m in messages if m["role"] == "user"][-3:]
    msg = [{"role": "system", "content": system + "\n".join(questions)}]
    msg.extend([{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"])
    return client.chat.completions.create(model="gpt-4o", messages=msg)


def send_stamped(system: str, messages: list):
    questions = [f"{m['created_at']}: {m['content']}" for m in messages if m["role"] == "user"]
    msg = [{"role": "system", "content": system + "\n".join(questions)}]
    msg.extend([{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"])
    return client.chat.completions.create(model="gpt-4o", messages=msg)


def send_whole(system: str, messages: list):
    msg = [{"role": "system", "content": system + "\n".join(m["role"] + repr(m) for m in messages)}]
    msg.extend(messages)
    return client.chat.completions.create(model="gpt-4o", messages=msg)


def ask(text: str, knowledge: str, prologue: str):
    messages = [{"role": "assistant", "content": prologue, "created_at": time.time()}]
    question = {"role": "user", "content": text, "id": str(uuid4())}
    messages.append(question)
    msg = []
    for m in messages:
        msg.append(m)
    if not msg[-1].get("id"):
        msg[-1]["id"] = str(uuid4())
    return send(SYSTEM_TEMPLATE.format(knowledge=knowledge), msg)


def ask_listed(text: str, knowledge: str, prologue: str):
    messages = [{"role": "assistant", "content": prologue, "created_at": time.time()}]
    question = {"role": "user", "content": text, "id": str(uuid4())}
    messages.append(question)
    return send(SYSTEM_TEMPLATE.format(knowledge=knowledge), messages)


def ask_stamped(text: str, knowledge: str, prologue: str):
    messages = [{"role": "assistant", "content": prologue}]
    messages.append({"role": "user", "content": text, "created_at": time.time()})
    return send_stamped(SYSTEM_TEMPLATE.format(knowledge=knowledge), messages)  # PC001: 69


def ask_whole(text: str, knowledge: str, prologue: str):
    messages = [{"role": "assistant", "content": prologue, "created_at": time.time()}]
    messages.append({"role": "user", "content": text})
    return send_whole(SYSTEM_TEMPLATE.format(knowledge=knowledge), messages)  # PC001: 67
