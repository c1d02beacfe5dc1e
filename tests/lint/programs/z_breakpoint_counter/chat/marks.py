# Breakpoints set in a loop over every message under a counter: `if marked < limit:` whose body
# marks a block and then counts it places at most `limit` breakpoints per request, whatever the
# length of the conversation; so does `if remaining:` (or `if left > 0:`) whose body marks and
# counts down from a constant. Beside them: a counter that is reset for each message, one
# counted outside the guarded branch, a limit of 5, a limit computed from the messages, a
# countdown never counted down, one from 5, one that steps past 0 (3, 1, -1: still true), a
# mark besides the countdown's in each element or in the else branch, and no counter at all:
# one breakpoint per message (PC007). A step spelled out (`left = left - 1`, `marked = 1 +
# marked`) counts as `-= 1` / `+= 1`; from 5, or the wrong way, it is still reported. The
# step may sit beside the mark in an inner `if` of the capped branch (reported where another
# inner branch marks uncounted), and a body that starts with `if count >= 3: continue` (or `if
# not left: continue`) caps what follows (from 5, or after a mark made before the guard, it is
# reported). A name bound to an index test (`is_last = index == len(messages) - 1`) guards as
# the test does; one bound to a role test does not.
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


def mark_system_and_newest_three(messages: list[dict]) -> list[dict]:
    """The system message and the newest 3 messages, counted down: 4 breakpoints at most."""
    if messages[0]["role"] == "system":
        messages[0]["cache_control"] = {"type": "ephemeral"}
    remaining = 3
    for message in reversed(messages):
        block = message
        if block and isinstance(block, dict):
            if remaining:
                block["cache_control"] = {"type": "ephemeral"}
                remaining -= 1
            elif "cache_control" in block:
                del block["cache_control"]
    return messages


def mark_while_some_left(messages: list[dict]) -> None:
    left = 4
    for message in reversed(messages):
        if left > 0:
            message["content"][-1]["cache_control"] = EPHEMERAL
            left -= 1


def mark_remaining_never_counted(messages: list[dict]) -> None:
    remaining = 3
    for message in reversed(messages):
        if remaining:
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12


def mark_remaining_five(messages: list[dict]) -> None:
    remaining = 5
    for message in reversed(messages):
        if remaining:
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12
            remaining -= 1


def mark_remaining_past_zero(messages: list[dict]) -> None:
    remaining = 3
    for message in reversed(messages):
        if remaining:
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12
            remaining -= 2


def mark_remaining_and_every_first_block(messages: list[dict]) -> None:
    remaining = 3
    for message in reversed(messages):
        if remaining:
            message["content"][-1]["cache_control"] = EPHEMERAL
            remaining -= 1
        message["content"][0]["cache_control"] = EPHEMERAL  # PC007: 8


def mark_remaining_else_every_message(messages: list[dict]) -> None:
    remaining = 3
    for message in reversed(messages):
        if remaining:
            message["content"][-1]["cache_control"] = EPHEMERAL
            remaining -= 1
        else:
            message["content"][0]["cache_control"] = EPHEMERAL  # PC007: 12


def mark_counted_else_every_message(messages: list[dict]) -> None:
    used = 0
    for message in messages:
        if used < 3:
            message["content"][-1]["cache_control"] = EPHEMERAL
            used += 1
        else:
            message["content"][0]["cache_control"] = EPHEMERAL  # PC007: 12


def mark_user_turns_while_some_left(messages: list[dict]) -> None:
    remaining = 3
    for message in reversed(messages):
        if remaining and message["role"] == "user":
            message["content"][-1]["cache_control"] = EPHEMERAL
            remaining -= 1


def mark_user_turns_or_while_some_left(messages: list[dict]) -> None:
    remaining = 3
    for message in reversed(messages):
        if remaining or message["role"] == "user":
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12
            remaining -= 1


def mark_while_some_left_spelled_out(messages: list[dict]) -> None:
    left = 3
    for message in reversed(messages):
        if left:
            message["content"][-1]["cache_control"] = EPHEMERAL
            left = left - 1


def mark_counted_spelled_out(messages: list[dict]) -> None:
    marked = 0
    for message in reversed(messages):
        if marked < 4:
            message["content"][-1]["cache_control"] = EPHEMERAL
            marked = 1 + marked


def mark_spelled_out_five(messages: list[dict]) -> None:
    left = 5
    for message in reversed(messages):
        if left:
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12
            left = left - 1


def mark_spelled_out_the_wrong_way(messages: list[dict]) -> None:
    left = 3
    for message in reversed(messages):
        if left:
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12
            left = left + 1


def mark_counted_in_inner_branch(messages: list[dict]) -> None:
    used = 0
    for message in reversed(messages):
        if used < 2:
            if message["role"] == "user":
                message["content"][-1]["cache_control"] = EPHEMERAL
                used += 1


def mark_counted_in_one_inner_branch(messages: list[dict]) -> None:
    used = 0
    for message in reversed(messages):
        if used < 2:
            if message["role"] == "user":
                message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 16
                used += 1
            else:
                message["content"][-1]["cache_control"] = EPHEMERAL


def mark_after_spent_guard(messages: list[dict]) -> None:
    count = 0
    for message in reversed(messages):
        if count >= 3:
            continue
        if message["role"] == "user":
            message["content"][-1]["cache_control"] = EPHEMERAL
            count += 1


def mark_after_spent_countdown(messages: list[dict]) -> None:
    left = 2
    for message in reversed(messages):
        if not left:
            continue
        message["content"][-1]["cache_control"] = EPHEMERAL
        left -= 1


def mark_after_spent_guard_of_five(messages: list[dict]) -> None:
    count = 0
    for message in reversed(messages):
        if count >= 5:
            continue
        message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 8
        count += 1


def mark_before_spent_guard(messages: list[dict]) -> None:
    count = 0
    for message in reversed(messages):
        message["content"][0]["cache_control"] = EPHEMERAL  # PC007: 8
        if count >= 2:
            continue
        message["content"][-1]["cache_control"] = EPHEMERAL
        count += 1


def mark_then_count_below(messages: list[dict]) -> None:
    count = 0
    for message in reversed(messages):
        if message["role"] == "user":
            if count < 2:
                message["content"][0]["cache_control"] = EPHEMERAL
            elif "cache_control" in message["content"][0]:
                del message["content"][0]["cache_control"]
            count += 1


def mark_then_count_below_past_four(messages: list[dict]) -> None:
    count = 0
    for message in reversed(messages):
        if count < 6:
            message["content"][0]["cache_control"] = EPHEMERAL  # PC007: 12
        count += 1


def mark_then_skip_the_count(messages: list[dict]) -> None:
    count = 0
    for message in reversed(messages):
        if count < 2:
            message["content"][0]["cache_control"] = EPHEMERAL  # PC007: 12
            if message["role"] == "user":
                continue
        count += 1


def mark_then_count_in_other_branch(messages: list[dict]) -> None:
    count = 0
    for message in reversed(messages):
        if message["role"] == "user":
            if count < 2:
                message["content"][0]["cache_control"] = EPHEMERAL  # PC007: 16
        else:
            count += 1


def mark_named_last(messages: list[dict]) -> None:
    for index, message in enumerate(messages):
        is_last = index == len(messages) - 1
        if is_last:
            message["content"][-1]["cache_control"] = EPHEMERAL


def mark_named_role(messages: list[dict]) -> None:
    for message in messages:
        is_user = message["role"] == "user"
        if is_user:
            message["content"][-1]["cache_control"] = EPHEMERAL  # PC007: 12


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
