# Shape 10: a breakpoint helper called for every part of every message, with no guard.
import anthropic

client = anthropic.Anthropic()


def add_cache(block: dict) -> None:
    block["cache_control"] = {"type": "ephemeral"}


def ask(messages: list):
    for message in messages:
        for part in message["content"]:
            add_cache(part)  # PC007: 12
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=messages)


def ask_last(messages: list):
    add_cache(messages[-1]["content"][-1])
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=messages)


def to_block(part: str, cache: bool = False) -> dict:
    block = {"type": "text", "text": part}
    if cache:
        block["cache_control"] = {"type": "ephemeral"}
    return block


def ask_blocks(messages: list):
    converted = []
    for message in messages:
        converted.append(
            {
                "role": message["role"],
                "content": [to_block(part, cache=True) for part in message["parts"]],  # PC007: 28
            }
        )
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=converted)
