"""Requests built as dicts and handed to a sender that splats them (``create(**payload)``)."""

import time

from .sender import send, send_read


async def stamped(history):
    system = f"Now: {time.time()}"
    return await send({"model": "m", "system": system, "messages": history})  # PC001: 22


async def stamped_branch(history, brief):
    system = f"Now: {time.time()}"
    if brief:
        body = {"model": "m", "system": "Be brief.", "messages": history}
    else:
        body = {"model": "m", "system": system, "messages": history}
    return await send(body)  # PC001: 22


async def tools_listed(sessions, history):
    listed = [t for session in sessions for t in (await session.list_tools()).tools]
    tools = [{"name": t.name, "input_schema": t.inputSchema} for t in listed]
    return await send({"model": "m", "tools": tools, "messages": history})  # PC005: 22


async def tools_sorted(sessions, history):
    listed = [t for session in sessions for t in (await session.list_tools()).tools]
    tools = [{"name": t.name, "input_schema": t.inputSchema} for t in listed]
    tools.sort(key=lambda t: t["name"])
    return await send({"model": "m", "tools": tools, "messages": history})


async def stamped_metadata(history):
    # a time under a key no sink region reads: silent, also for a reader of ``["system"]``
    meta = {"user_id": f"u-{time.time()}"}
    body = {"model": "m", "system": "Be brief.", "messages": history, "metadata": meta}
    await send(body)
    return await send_read(body)


async def stamped_metadata_no_system(history):
    meta = {"user_id": f"u-{time.time()}"}
    return await send_read({"model": "m", "messages": history, "metadata": meta})


async def stamped_question(history, question):
    turn = {"role": "user", "content": f"{time.time()}: {question}"}
    return await send({"model": "m", "system": "Be brief.", "messages": [*history, turn]})


async def stamped_unknown_keys(history, extra):
    # the dict's keys are not known once another dict is merged in: which key holds the time
    # is not shown, an unproven flow (``--explain``)
    arguments = {"model": "m", "messages": history}
    arguments.update({"system": f"Now: {time.time()}"})
    arguments.update(extra)
    return await send(arguments)


async def stamped_stored_key(history):
    # an entry stored under a constant key keeps the dict's keys known: the time is the system
    later = {"model": "m", "messages": history}
    later["system"] = f"Now: {time.time()}"
    return await send(later)  # PC001: 22


async def tools_chosen_unknown_keys(history, tools, question):
    # a tool set chosen by the question, in a dict whose keys are not known: not this key's
    body = {"model": "m", "messages": history}
    if "search" in question:
        body["tools"] = tools
    body.update({"system": "Be brief."})
    return await send(body)


async def tools_chosen(history, tools, question):
    chosen = tools if "search" in question else []
    return await send({"model": "m", "tools": chosen, "messages": history})  # PC006: 22


def to_api(messages):
    return [{"role": m["role"], "content": m["content"]} for m in messages]


async def relay(messages):
    # a dict of keys not known here (a comprehension drops the empty ones): which key holds
    # what the messages hold is not shown, so what reaches ``system=`` is unproven
    params = {k: v for k, v in {"model": "m", "messages": to_api(messages)}.items() if v}
    return await send(params)


async def relayed(question):
    history = [{"role": "user", "content": f"Now: {time.time()}"}]
    history.append({"role": "user", "content": question})
    return await relay(history)
