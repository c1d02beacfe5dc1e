import anthropic

from .marks import mark_last_user

client = anthropic.Anthropic()


def run(history: list, text: str, tools: list) -> str:
    messages = [*history, {"role": "user", "content": text}]
    mark_last_user(messages)  # PC018: 4
    while True:
        reply = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024, tools=tools, messages=messages
        )
        if reply.stop_reason != "tool_use":
            return reply.content[0].text
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": "tool results"})


def run_moving(history: list, text: str, tools: list) -> str:
    messages = [*history, {"role": "user", "content": text}]
    while True:
        mark_last_user(messages)
        reply = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024, tools=tools, messages=messages
        )
        if reply.stop_reason != "tool_use":
            return reply.content[0].text
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": "tool results"})
