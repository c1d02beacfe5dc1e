"""The fixed look-alikes of bad.py, and a multi-turn conversation whose tail changes every turn:
`promptcache check` must stay silent on all of them."""

import os
import random
import uuid
from pathlib import Path

import anthropic
import openai
from handbook import INSTRUCTIONS
from prompts import question_with_time, stable_system_prompt

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-4o-mini"
HERE = Path(__file__).parent
TOOL_NAMES = {"search_docs", "get_weather", "send_email", "open_ticket"}
EXAMPLES = ["Q: refund? A: see section 3.", "Q: late parcel? A: see section 7.", "Q: login? A: 12."]
MARK = {"type": "ephemeral"}


def tool(name):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def clock(client):
    client.messages.create(
        model=CLAUDE,
        max_tokens=16,
        system=[{"type": "text", "text": stable_system_prompt(), "cache_control": MARK}],
        messages=[{"role": "user", "content": question_with_time("hi")}],
    )


def tools_set(client):
    client.chat.completions.create(
        model=GPT,
        tools=[tool(name) for name in sorted(TOOL_NAMES)],
        messages=[{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "hi"}],
    )


def skills(client):
    folder = HERE / "skills"
    text = "\n".join((folder / name).read_text() for name in sorted(os.listdir(folder)))
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
        prompt_cache_key="session-main",
        messages=[{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "hi"}],
        extra_headers={"x-request-id": str(uuid.uuid4())},
    )


def few_shot(client):
    client.responses.create(
        model=GPT,
        instructions=f"{INSTRUCTIONS}\nExample: {random.Random(7).choice(EXAMPLES)}",
        input="hi",
    )


def breakpoints(client):
    blocks = [{"type": "text", "text": INSTRUCTIONS, "cache_control": MARK}]
    blocks += [{"type": "text", "text": f"Part {i}.", "cache_control": MARK} for i in range(3)]
    client.messages.create(
        model=CLAUDE, max_tokens=16, system=blocks, messages=[{"role": "user", "content": "hi"}]
    )


def conversation(client):
    messages = []
    for question in ("Where is my parcel?", "And the refund?", "Thanks, bye."):
        messages.append({"role": "user", "content": question_with_time(question)})
        reply = client.messages.create(
            model=CLAUDE,
            max_tokens=16,
            system=[{"type": "text", "text": INSTRUCTIONS, "cache_control": MARK}],
            messages=messages,
        )
        messages.append({"role": "assistant", "content": reply.content[0].text})


if __name__ == "__main__":
    claude, gpt = anthropic.Anthropic(), openai.OpenAI()
    clock(claude)
    tools_set(gpt)
    skills(gpt)
    cache_key(gpt)
    few_shot(gpt)
    breakpoints(claude)
    conversation(claude)
