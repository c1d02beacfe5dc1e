# Shape 2: write, then return, over reversed(blocks) marks one block; without the return every
# text block is marked.
import anthropic

client = anthropic.Anthropic()


def mark_last_text(blocks: list) -> None:
    for block in reversed(blocks):
        if block["type"] == "text":
            block["cache_control"] = {"type": "ephemeral"}
            return


def mark_every_text(blocks: list) -> None:
    for block in reversed(blocks):
        if block["type"] == "text":
            block["cache_control"] = {"type": "ephemeral"}  # PC007: 12


def ask(blocks: list):
    mark_last_text(blocks)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        messages=[{"role": "user", "content": blocks}],
    )
