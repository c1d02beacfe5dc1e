# Breakpoints set on the messages a selection loop picked: a loop that appends one index at a
# time and stops itself once the list holds a constant number (`if len(picked) >= 4: break`
# after the append, the same test before it, or `while len(picked) < 3:`) picks at most that
# many, so marking each pick places at most 4 breakpoints. Beside them: a pick per long
# message with no stop, a stop at 6, a `continue` that can skip the stop, a second place that
# appends, a list handed to a helper that may extend it and a selection loop inside a loop
# over the turns that enters it again: one breakpoint per element of an unbounded list (or 6).
# A list appended to once per pass of a loop over a fixed tuple holds at most that many;
# beside it a tuple of 6 and the same loop entered again for every message.
import anthropic

client = anthropic.Anthropic()
EPHEMERAL = {"type": "ephemeral"}
MAX_PICKS = 4


def _by_size(messages: list[dict]) -> list[tuple[int, int]]:
    sizes = [(i, len(str(m.get("content", "")))) for i, m in enumerate(messages)]
    sizes.sort(key=lambda pair: pair[1], reverse=True)
    return sizes


def send_largest_cached(messages: list[dict]) -> object:
    """The 4 largest messages are marked: the picking loop stops at 4."""
    copies = [dict(m) for m in messages]
    picked = []
    for index, _size in _by_size(copies):
        if index not in picked:
            picked.append(index)
            if len(picked) >= MAX_PICKS:
                break
    for index in picked:
        marked = copies[index].copy()
        marked["cache_control"] = EPHEMERAL
        copies[index] = marked
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=copies)


def send_guarded_cached(messages: list[dict]) -> object:
    """The test before the append stops the loop at 3 picks."""
    picked = []
    for index, message in enumerate(messages):
        if len(picked) == 3:
            break
        if message["role"] == "user":
            picked.append(index)
    for index in picked:
        messages[index]["cache_control"] = EPHEMERAL
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=messages)


def send_while_cached(messages: list[dict]) -> object:
    """A while loop on the list's length picks at most 3."""
    picked = []
    position = len(messages) - 1
    while len(picked) < 3 and position >= 0:
        picked.append(position)
        position -= 1
    for index in picked:
        messages[index]["cache_control"] = EPHEMERAL
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=messages)


def send_every_long_cached(messages: list[dict]) -> object:
    """Every long message is picked: no stop."""
    picked = []
    for index, message in enumerate(messages):
        if len(str(message["content"])) > 500:
            picked.append(index)
    for index in picked:
        messages[index]["cache_control"] = EPHEMERAL  # PC007: 8
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=messages)


def send_six_cached(messages: list[dict]) -> object:
    """The loop stops at 6: six breakpoints."""
    picked = []
    for index, _size in _by_size(messages):
        picked.append(index)
        if len(picked) >= 6:
            break
    for index in picked:
        messages[index]["cache_control"] = EPHEMERAL  # PC007: 8
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=messages)


def send_skipped_stop_cached(messages: list[dict]) -> object:
    """A `continue` between the append and the stop skips it for tool turns."""
    picked = []
    for index, message in enumerate(messages):
        picked.append(index)
        if message["role"] == "tool":
            continue
        if len(picked) >= 4:
            break
    for index in picked:
        messages[index]["cache_control"] = EPHEMERAL  # PC007: 8
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=messages)


def send_two_appends_cached(messages: list[dict]) -> object:
    """The system message is added outside the stopping loop as well."""
    picked = []
    for index, _size in _by_size(messages):
        picked.append(index)
        if len(picked) >= 4:
            break
    for index, message in enumerate(messages):
        if message["role"] == "system":
            picked.append(index)
    for index in picked:
        messages[index]["cache_control"] = EPHEMERAL  # PC007: 8
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=messages)


def _add_tool_turns(picked: list[int], messages: list[dict]) -> None:
    picked.extend(i for i, m in enumerate(messages) if m["role"] == "tool")


def send_handed_out_cached(messages: list[dict]) -> object:
    """The list is handed to a helper that extends it."""
    picked = []
    for index, _size in _by_size(messages):
        picked.append(index)
        if len(picked) >= 4:
            break
    _add_tool_turns(picked, messages)
    for index in picked:
        messages[index]["cache_control"] = EPHEMERAL  # PC007: 8
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=messages)


def send_reentered_cached(turns: list[list[dict]], messages: list[dict]) -> object:
    """The stopping loop runs again for every turn: each run adds one more past the stop."""
    picked = []
    for turn in turns:
        for index, _size in _by_size(turn):
            picked.append(index)
            if len(picked) >= 2:
                break
    for index in picked:
        messages[index]["cache_control"] = EPHEMERAL  # PC007: 8
    return client.messages.create(model="claude-sonnet-4-5", max_tokens=512, messages=messages)


SEGMENTS = ("static", "stable", "dynamic")


def send_segment_tails_cached(blocks: list[dict], messages: list[dict]) -> object:
    """One pick per segment of a fixed tuple: the loop runs 3 times, so at most 3 marks."""
    tails: dict[str, int] = {}
    for index, block in enumerate(blocks):
        tails[str(block.get("segment") or "static")] = index
    chosen: list[int] = []
    for segment in ("static", "stable", "dynamic"):
        if segment in tails:
            chosen.append(tails[segment])
    for index in chosen:
        blocks[index] = {**blocks[index], "cache_control": EPHEMERAL}
    return client.messages.create(
        model="claude-sonnet-4-5", max_tokens=512, system=blocks, messages=messages
    )


def send_named_segments_cached(blocks: list[dict], messages: list[dict]) -> object:
    """The same over a module constant of 3 names."""
    kept = []
    for segment in SEGMENTS:
        kept.append(len(segment))
    for index in kept:
        messages[index]["cache_control"] = EPHEMERAL
    return client.messages.create(
        model="claude-sonnet-4-5", max_tokens=512, system=blocks, messages=messages
    )


def send_six_segments_cached(blocks: list[dict], messages: list[dict]) -> object:
    """A fixed tuple of 6 segments: six breakpoints."""
    chosen = []
    for segment in ("a", "b", "c", "d", "e", "f"):
        chosen.append(len(segment))
    for index in chosen:
        blocks[index]["cache_control"] = EPHEMERAL  # PC007: 8
    return client.messages.create(
        model="claude-sonnet-4-5", max_tokens=512, system=blocks, messages=messages
    )


def send_segments_per_message_cached(blocks: list[dict], messages: list[dict]) -> object:
    """The 3-segment loop runs again for every message: 3 picks each, no bound."""
    chosen = []
    for message in messages:
        for segment in ("static", "stable", "dynamic"):
            if segment in message:
                chosen.append(message[segment])
    for index in chosen:
        blocks[index]["cache_control"] = EPHEMERAL  # PC007: 8
    return client.messages.create(
        model="claude-sonnet-4-5", max_tokens=512, system=blocks, messages=messages
    )
