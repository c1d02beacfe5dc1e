# Wrong chains: a time stored into one field of an object passed in (a token's expiry, a start
# time) is not the system prompt held by another field; the field that holds it is found.
import time

import anthropic

client = anthropic.Anthropic()


def stamp(ctx) -> None:
    ctx.started = time.time()


def ask(ctx, question: str):
    ctx.started = time.time()
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=ctx.system_prompt,
        messages=[{"role": "user", "content": question}],
    )


def ask_stamped(ctx, question: str):
    stamp(ctx)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=ctx.system_prompt,
        messages=[{"role": "user", "content": question}],
    )


def ask_dated(ctx, question: str):
    ctx.system_prompt = f"Now: {time.time()}"
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=ctx.system_prompt,  # PC001: 15
        messages=[{"role": "user", "content": question}],
    )
