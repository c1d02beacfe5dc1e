"""A ReAct-style reply: format the whole memory, call the model."""

from openai import OpenAI

from .formatter import format_history

client = OpenAI()


def reply(system: str, memory: list[dict], question: str) -> str:
    messages = [{"role": "system", "content": system}, *format_history(memory)]  # PC002: 55
    messages.append({"role": "user", "content": question})
    response = client.chat.completions.create(model="gpt-5-mini", messages=messages)
    return response.choices[0].message.content or ""
