"""Requests built with ``dict(k=v)`` keywords, read as the dict literals they equal: a time
in an earlier turn of a splatted request, or tools listed by two MCP servers, are found; the newest
turn, the content of a message whose time sits under another key, and tools listed by the
app's own API client (annotated with a class taken by ``import *``, or built from a class
imported by name) are not."""

import asyncio
from datetime import datetime

from mcp import ClientSession
from openai import OpenAI

from .api import *
from .api import ApiRequest as Client
from .sessions import LoggedSession

client = OpenAI()


def stamped_first_turn(question: str, answer: str):
    now = datetime.now()
    params = dict(
        model="m",
        messages=[
            dict(role="user", content=f"At {now}: hello"),  # PC001: 38
            dict(role="assistant", content=answer),
            dict(role="user", content=question),
        ],
    )
    return client.chat.completions.create(**params)


def stamped_newest_turn(question: str, answer: str):
    now = datetime.now()
    params = dict(
        model="m",
        messages=[
            dict(role="user", content="hello"),
            dict(role="assistant", content=answer),
            dict(role="user", content=f"{question} (at {now})"),
        ],
    )
    return client.chat.completions.create(**params)


def stamped_under_another_key(question: str):
    note = dict(role="system", content="Be brief.", written=datetime.now())
    messages = [{"role": "system", "content": note["content"]}, {"role": "user", "content": question}]
    return client.chat.completions.create(model="m", messages=messages)


async def mcp_tools(session: ClientSession, other: ClientSession, question: str):
    listed = await asyncio.gather(session.list_tools(), other.list_tools())
    params = dict(model="m", messages=[dict(role="user", content=question)])
    params["tools"] = [{"type": "function", "function": {"name": t.name}} for one in listed for t in one.tools]  # PC005: 22
    return client.chat.completions.create(**params)


async def logged_session_tools(session: LoggedSession, other: LoggedSession, question: str):
    listed = await asyncio.gather(session.list_tools(), other.list_tools())
    params = dict(model="m", messages=[dict(role="user", content=question)])
    params["tools"] = [{"type": "function", "function": {"name": t.name}} for one in listed for t in one.tools]  # PC005: 22
    return client.chat.completions.create(**params)


def api_tools(api: ApiRequest, question: str):
    configs = api.list_tools() or {}
    params = dict(model="m", messages=[dict(role="user", content=question)])
    params["tools"] = list(configs.values())
    return client.chat.completions.create(**params)


def client_tools(question: str):
    configs = Client("http://127.0.0.1:7861").list_tools()
    params = dict(model="m", messages=[dict(role="user", content=question)])
    params["tools"] = list(configs.values())
    return client.chat.completions.create(**params)


def api_tools_given(api: ApiRequest, question: str):
    configs = api.list_tools() or {}
    return client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": question}], tools=list(configs.values())
    )


def client_tools_given(question: str):
    configs = Client("http://127.0.0.1:7861").list_tools()
    return client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": question}], tools=list(configs.values())
    )


async def logged_session_tools_given(session: LoggedSession, other: LoggedSession, question: str):
    listed = await asyncio.gather(session.list_tools(), other.list_tools())
    return client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": question}],
        tools=[{"type": "function", "function": {"name": t.name}} for one in listed for t in one.tools],  # PC005: 14
    )
