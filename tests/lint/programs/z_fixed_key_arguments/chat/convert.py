import json


def to_chat(messages):
    """A code cell becomes a function call whose arguments are a dict of fixed keys."""
    out = []
    for message in messages:
        new = {}
        if message["type"] == "message":
            new["role"] = message["role"]
            new["content"] = message["content"]
        elif message["type"] == "code":
            new["role"] = "assistant"
            new["function_call"] = {
                "name": "execute",
                "arguments": json.dumps(
                    {"language": message["format"], "code": message["content"]}
                ),
            }
            new["content"] = ""
        out.append(new)
    return out


def to_chat_stored(messages):
    """A stored call's arguments, as the store hands them back."""
    out = []
    for message in messages:
        new = {}
        if message["type"] == "message":
            new["role"] = message["role"]
            new["content"] = message["content"]
        elif message["type"] == "call":
            new["role"] = "assistant"
            new["function_call"] = {
                "name": message["tool"],
                "arguments": json.dumps(message["args"]),
            }
            new["content"] = ""
        out.append(new)
    return out


def to_chat_rekeyed(messages):
    """A stored call's arguments copied key by key into a new dict: the store's order."""
    out = []
    for message in messages:
        if message["type"] == "call":
            args = {key: value for key, value in message["args"].items()}
            call = {"name": message["tool"], "arguments": json.dumps(args)}
            out.append({"role": "assistant", "content": "", "function_call": call})
        else:
            out.append({"role": message["role"], "content": message["content"]})
    return out
