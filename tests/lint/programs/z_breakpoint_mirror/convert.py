# A converter from a caller's chat messages to the request's message dicts: each content block
# the caller marked keeps its breakpoint (`if part.get("cache_control"):` for the loop's own
# element, also `part["cache_control"]`, `part.cache_control`, `... is not None`, `and`), so the
# request holds as many as the caller placed, not one per block. Beside them: a loop that marks
# each block under a test of a setting (`options.get("cache_control")`, `self.cache_control`),
# and one that marks every block that has no marker (`if not part.get(...)`): one breakpoint
# per element (PC007).
import anthropic

client = anthropic.Anthropic()
EPHEMERAL = {"type": "ephemeral"}


def convert_system(parts: list[dict]) -> list[dict]:
    """The caller's marks, one for one: bounded by what the caller sent."""
    blocks = []
    for part in parts:
        block = {"type": "text", "text": part["text"]}
        if part.get("cache_control"):
            block["cache_control"] = {"type": "ephemeral"}
        blocks.append(block)
    return blocks


def convert_messages(messages: list[dict]) -> list[dict]:
    out = []
    for message in messages:
        content = []
        for index, part in enumerate(message["content"]):
            block = {"type": "text", "text": part["text"], "index": index}
            if part["cache_control"] is not None and part["text"].strip():
                block["cache_control"] = EPHEMERAL
            content.append(block)
        out.append({"role": message["role"], "content": content})
    return out


class Part:
    def __init__(self, text: str, cache_control: dict | None = None) -> None:
        self.text = text
        self.cache_control = cache_control


def convert_parts(parts: list[Part]) -> list[dict]:
    blocks = []
    for part in parts:
        block = {"type": "text", "text": part.text}
        if part.cache_control:
            block["cache_control"] = EPHEMERAL
        blocks.append(block)
    return blocks


def convert_tagged(parts: list[dict]) -> list[dict]:
    blocks = []
    for part in parts:
        if getattr(part, "cache_control", None) is None:
            blocks.append({"type": "text", "text": part["text"]})
        else:
            blocks.append({"type": "text", "text": part["text"], "cache_control": EPHEMERAL})
    return blocks


def convert_with_setting(parts: list[dict], options: dict) -> list[dict]:
    """A setting, not the element: every block is marked."""
    blocks = []
    for part in parts:
        block = {"type": "text", "text": part["text"]}
        if options.get("cache_control"):
            block["cache_control"] = EPHEMERAL  # PC007: 12
        blocks.append(block)
    return blocks


def mark_unmarked(parts: list[dict]) -> list[dict]:
    """Each block without a marker gets one: one per element."""
    for part in parts:
        if not part.get("cache_control"):
            part["cache_control"] = EPHEMERAL  # PC007: 12
    return parts


class Converter:
    def __init__(self, cache_control: bool) -> None:
        self.cache_control = cache_control

    def convert(self, parts: list[dict]) -> list[dict]:
        blocks = []
        for part in parts:
            block = {"type": "text", "text": part["text"]}
            if self.cache_control:
                block["cache_control"] = EPHEMERAL  # PC007: 16
            blocks.append(block)
        return blocks


def ask(system_parts: list[dict], messages: list[dict]) -> str:
    reply = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=convert_system(system_parts),
        messages=convert_messages(messages),
    )
    return reply.content[0].text
