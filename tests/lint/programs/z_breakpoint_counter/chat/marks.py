# Breakpoints set in a loop over every message under a counter: `if marked < limit:` whose body
# marks a block and then counts it places at most `limit` breakpoints per request, whatever the
# length of the conversation. Beside them: a counter that is reset for each message, one
# counted outside the guarded branch, a limit of 5, a limit computed from the messages, and
# no counter at all: one breakpoint per message (PC007).
import anthropic

client = anthropic.Anthropic()
EPHEMERAL = {"type": "ephemeral"}
LIMIT: int = 3


def mark_newest_user_turns(messages: list[dict], max_marks=3) -> list[dict]:
    """The newest user turns, at most `max_marks` of them: bounded."""
    out = []
    marked = 0
    for message in reversed(messages):
        if message["role"] == "user" and isinstance(message["content"], list):
            content = []
            for item in reversed(message["content"]):
                block = dict(item)
                if marked < max_marks:
                    block["cache_control"] = EPHEMERAL
                    marked += 1
                content.append(block)
            content.reverse()
            out.append({"role": "user", "content": content})
        elif message["role"] == "user":
            block = {"type": "text", "text": message["content"]}
            if max_marks > marked:
                block["cache_control"] = EPHEMERAL
                marked += 1
            out.append({"role": "user", "content": [block]})
        else:
            out.append(message)
    return list(reversed(out))


def mark_with_module_limit(messages: list[dict]) -> None:
    used = 0
    for message in messages:
        if used < LIMIT:
            message["content"][-1]["cache_control"] = EPHEMERAL
            used += 1


def mark_with_configured_limit(messages: list[dict], settings) -> None:
    used = 0
    for message in messages:
        if used < settings.max_breakpoints:
            message["content"][-1]["cache_control"] = EPHEMERAL
            used += 1


def mark_reset_per_message(messages: list[dict]) -> None:
    for message in messages:
        used = 0
        if used < 2:
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12
            used += 1


def mark_counted_elsewhere(messages: list[dict]) -> None:
    used = 0
    for message in messages:
        if used < 2:
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12
        used += 1 if message["role"] == "user" else 0


def mark_five(messages: list[dict]) -> None:
    used = 0
    for message in messages:
        if used < 5:
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12
            used += 1


def mark_up_to_computed_limit(messages: list[dict], settings) -> None:
    used = 0
    for message in messages:
        if used < settings.limit_for(messages):
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12
            used += 1


def mark_every_message(messages: list[dict]) -> None:
    for message in messages:
        message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 8


def ask(messages: list[dict], settings):
    mark_with_module_limit(messages)
    mark_with_configured_limit(messages, settings)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        messages=mark_newest_user_turns(messages),
    )
