"""The clock bug sent through every kind of client: streaming, async, forked workers, raw httpx
and requests posts straight to the vendors' hosts. `python clients.py [CASE ...]`."""

import asyncio
import multiprocessing
import sys

import anthropic
import httpx
import openai
import requests
from prompts import system_prompt

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-4o-mini"


def openai_stream():
    stream = openai.OpenAI().chat.completions.create(
        model=GPT,
        stream=True,
        stream_options={"include_usage": True},
        messages=[
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": "hi"},
        ],
    )
    print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))


def anthropic_stream():
    with anthropic.Anthropic().messages.stream(
        model=CLAUDE,
        max_tokens=16,
        system=[{"type": "text", "text": system_prompt(), "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "hi"}],
    ) as stream:
        print(stream.get_final_text())


async def ask_async(client):
    reply = await client.messages.create(
        model=CLAUDE,
        max_tokens=16,
        system=[{"type": "text", "text": system_prompt(), "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "hi"}],
    )
    print(reply.content[0].text)


def anthropic_async():
    asyncio.run(ask_async(anthropic.AsyncAnthropic()))


def responses_stream():
    stream = openai.OpenAI().responses.create(
        model=GPT, instructions=system_prompt(), input="hi", stream=True
    )
    print([event.type for event in stream][-1])


def worker(topic):
    reply = openai.OpenAI().chat.completions.create(
        model=GPT,
        messages=[
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": topic},
        ],
    )
    return reply.choices[0].message.content


def forked_workers():
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(worker, ["parcels", "refunds"]))


def raw_httpx():
    body = {"model": GPT, "messages": [{"role": "system", "content": system_prompt()}]}
    reply = httpx.post("https://api.openai.com/v1/chat/completions", json=body, timeout=30)
    print(reply.json()["choices"][0]["message"]["content"])


def raw_requests():
    body = {
        "model": CLAUDE,
        "max_tokens": 16,
        "system": [
            {"type": "text", "text": system_prompt(), "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [{"role": "user", "content": "hi"}],
    }
    reply = requests.post("https://api.anthropic.com/v1/messages", json=body, timeout=30)
    print(reply.json()["content"][0]["text"])


CASES = {
    f.__name__: f
    for f in (
        openai_stream,
        anthropic_stream,
        anthropic_async,
        responses_stream,
        forked_workers,
        raw_httpx,
        raw_requests,
    )
}

if __name__ == "__main__":
    for name in sys.argv[1:] or CASES:
        CASES[name]()
