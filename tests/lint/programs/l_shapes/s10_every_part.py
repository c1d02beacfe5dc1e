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


def ask_flagged(messages: list):
    converted = []
    for message in messages:
        use_cache = message.get("cache", False)
        blocks = []
        for part in message["parts"]:
            blocks.append(to_block(part, use_cache))  # PC007: 26
        converted.append({"role": message["role"], "content": blocks})
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=converted)


def ask_flagged_last(messages: list):
    converted = []
    for message in messages:
        use_cache = message.get("cache", False)
        blocks = []
        for i, part in enumerate(message["parts"]):
            is_last = i == len(message["parts"]) - 1
            blocks.append(to_block(part, use_cache and is_last))
        converted.append({"role": message["role"], "content": blocks})
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=converted)


def content_block(part, *, cache_control: dict | None = None) -> dict:
    if isinstance(part, str):
        block = {"type": "text", "text": part}
        if cache_control is not None:
            block["cache_control"] = cache_control
        return block
    return {"type": "image", "source": part}


def convert_parts(parts: list) -> list:
    # a type test is no cache flag: no breakpoint unless one is passed
    return [content_block(p) for p in parts]


def convert_parts_cached(parts: list) -> list:
    return [content_block(p, cache_control={"type": "ephemeral"}) for p in parts]  # PC007: 12
