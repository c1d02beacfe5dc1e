# A completion endpoint: the request's messages (or its question) are checked, the system
# messages left out and the newest given an id, in a helper that returns the lists or an
# error; the endpoint sends the list it unpacks.
from datetime import datetime
from uuid import uuid4

from dialog import agent
from web import get_request_json


def normalize(req: dict):
    messages = req.get("messages")
    if messages is None:
        messages = [{"role": "user", "content": req.get("question")}]
    if not isinstance(messages, list) or not messages:
        return None, {"error": "`messages` must be a non-empty list."}
    msg = []
    for m in messages:
        if m["role"] == "system":
            continue
        msg.append(m)
    if not msg[-1].get("id"):
        msg[-1]["id"] = str(uuid4())
    return (messages, msg), None


async def completion(system: str):
    req = await get_request_json()
    normalized, error = normalize(req)
    if error:
        return error
    messages, msg = normalized
    return await agent(system, msg, reasoning=False)


async def completion_stamped(system: str):
    # the look-alike: the time is in the newest message's content
    req = await get_request_json()
    req["messages"].append({"role": "user", "content": f"now: {datetime.now():%H:%M:%S}"})
    normalized, error = normalize(req)
    messages, msg = normalized
    return await agent(system, msg, reasoning=False)  # PC001: 31
