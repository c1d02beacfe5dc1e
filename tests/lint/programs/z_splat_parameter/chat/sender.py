"""Helpers that send a request dict their caller built."""

import anthropic

client = anthropic.AsyncAnthropic()


async def send(payload):
    return await client.messages.create(**payload)


async def send_read(payload):
    return await client.messages.create(
        model=payload["model"], system=payload["system"], messages=payload["messages"]
    )
