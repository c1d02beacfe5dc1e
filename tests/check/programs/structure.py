"""Requests that break a breakpoint rule by themselves, posted with raw httpx to Anthropic's host
(check reroutes them): TTL order, a breakpoint below the minimum, a window past the lookback.
Each function is one call site; the last one is its correct twin."""

import httpx
from handbook import INSTRUCTIONS

URL = "https://api.anthropic.com/v1/messages"
MODEL = "claude-sonnet-4-5"


def mark(ttl="5m"):
    return {"type": "ephemeral", "ttl": ttl}


def body(system, messages):
    return {"model": MODEL, "max_tokens": 16, "system": system, "messages": messages}


def ttl_order():
    system = [
        {"type": "text", "text": INSTRUCTIONS, "cache_control": mark("5m")},
        {"type": "text", "text": "House rules.", "cache_control": mark("1h")},
    ]
    httpx.post(URL, json=body(system, [{"role": "user", "content": "hi"}]), timeout=30)


def below_minimum():
    system = [{"type": "text", "text": "Be brief.", "cache_control": mark()}]
    httpx.post(URL, json=body(system, [{"role": "user", "content": "hi"}]), timeout=30)


def message(i):
    return {
        "role": "assistant" if i % 2 else "user",
        "content": [{"type": "text", "text": f"step {i}"}],
    }


def marked(messages):
    """The messages with the breakpoint on the newest one (a sliding breakpoint)."""
    last = messages[-1]
    block = {**last["content"][-1], "cache_control": mark()}
    return [*messages[:-1], {**last, "content": [*last["content"][:-1], block]}]


def lookback():
    """An agent turn that appends 26 messages: the newest breakpoint lies more than 20 block
    positions after the previous turn's, whose cache write it can no longer find."""
    messages = [message(0)]
    for added in (0, 26):
        messages += [message(len(messages) + i) for i in range(added)]
        httpx.post(URL, json=body(INSTRUCTIONS, marked(messages)), timeout=30)


def lookback_ok():
    messages = [message(0)]
    for added in (0, 10):
        messages += [message(len(messages) + i) for i in range(added)]
        httpx.post(URL, json=body(INSTRUCTIONS, marked(messages)), timeout=30)


if __name__ == "__main__":
    ttl_order()
    below_minimum()
    lookback()
    lookback_ok()
