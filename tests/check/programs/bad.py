"""Six cache breakers, one call site each (the clock twice: into Anthropic's `system` and into an
OpenAI system message): `python bad.py [CASE ...]` (default: all). Each client library is
imported only when a case needs it."""

import os
import random
import sys
import uuid
from pathlib import Path

from handbook import INSTRUCTIONS
from prompts import system_prompt

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-4o-mini"
HERE = Path(__file__).parent
TOOL_NAMES = {"search_docs", "get_weather", "send_email", "open_ticket"}
EXAMPLES = ["Q: refund? A: see section 3.", "Q: late parcel? A: see section 7.", "Q: login? A: 12."]


def tool(name):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def clock(client):
    client.messages.create(
        model=CLAUDE,
        max_tokens=16,
        system=[{"type": "text", "text": system_prompt(), "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "hi"}],
    )


def clock_chat(client):
    client.chat.completions.create(
        model=GPT,
        messages=[
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": "hi"},
        ],
    )


def tools_set(client):
    client.chat.completions.create(
        model=GPT,
        tools=[tool(name) for name in TOOL_NAMES],
        messages=[{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "hi"}],
    )


def skills(client):
    folder = HERE / "skills"
    text = "\n".join((folder / name).read_text() for name in os.listdir(folder))
    client.chat.completions.create(
        model=GPT,
        messages=[
            {"role": "system", "content": f"{text}\n{INSTRUCTIONS}"},
            {"role": "user", "content": "hi"},
        ],
    )


def cache_key(client):
    client.chat.completions.create(
        model=GPT,
        prompt_cache_key=f"session-{uuid.uuid4()}",
        messages=[{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "hi"}],
    )


def few_shot(client):
    client.responses.create(
        model=GPT,
        instructions=f"{INSTRUCTIONS}\nExample: {random.choice(EXAMPLES)}",
        input="hi",
    )


def breakpoints(client):
    marker = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": INSTRUCTIONS, "cache_control": marker}]
    blocks += [{"type": "text", "text": f"Part {i}.", "cache_control": marker} for i in range(4)]
    client.messages.create(
        model=CLAUDE, max_tokens=16, system=blocks, messages=[{"role": "user", "content": "hi"}]
    )


CASES = {
    "clock": ("anthropic", clock),
    "clock_chat": ("openai", clock_chat),
    "tools_set": ("openai", tools_set),
    "skills": ("openai", skills),
    "cache_key": ("openai", cache_key),
    "few_shot": ("openai", few_shot),
    "breakpoints": ("anthropic", breakpoints),
}


def client(vendor, made={}):  # noqa: B006 - one client per vendor
    if vendor not in made:
        if vendor == "anthropic":
            import anthropic

            made[vendor] = anthropic.Anthropic()
        else:
            import openai

            made[vendor] = openai.OpenAI()
    return made[vendor]


if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        vendor, case = CASES[name]
        case(client(vendor))
