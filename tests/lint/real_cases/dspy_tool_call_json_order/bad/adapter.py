"""Render a stored conversation (tool calls and results included) as chat messages."""

import json


def _tool_result_content(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _tool_call_message(call: dict) -> dict:
    return {
        "id": call["id"],
        "type": "function",
        "function": {
            "name": call["name"],
            "arguments": json.dumps(call["args"], ensure_ascii=False),
        },
    }


def format_turns(turns: list[dict]) -> list[dict]:
    messages = []
    for turn in turns:
        messages.append({"role": "user", "content": turn["question"]})
        calls = [_tool_call_message(call) for call in turn["calls"]]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for call in turn["calls"]:
            content = _tool_result_content(call["result"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return messages
