# Shape 3: an is-last guard gives one breakpoint per message; the same helper without it
# (shape 10) marks every part of every message.
import anthropic

client = anthropic.Anthropic()


def to_block(part: str, cache: bool = False) -> dict:
    block = {"type": "text", "text": part}
    if cache:
        block["cache_control"] = {"type": "ephemeral"}
    return block


def convert(parts: list[str], use_cache: bool) -> list[dict]:
    out = []
    for i, part in enumerate(parts):
        out.append(to_block(part, cache=use_cache and i == len(parts) - 1))
    return out


def ask(parts: list[str]):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        messages=[{"role": "user", "content": convert(parts, True)}],
    )


def convert_all(parts: list[str]) -> list[dict]:
    out = []
    for part in parts:
        out.append(to_block(part, cache=True))  # PC007: 19
    return out
