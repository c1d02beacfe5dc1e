"""Turn stored messages into chat-completion messages; re-run before every model call."""

import shortuuid


def convert_tool_result_to_string(blocks: list[dict]) -> str:
    lines = []
    for block in blocks:
        if block["type"] == "text":
            lines.append(block["text"])
        else:
            # an identifier so later text can refer to the promoted media
            identifier = shortuuid.uuid()
            lines.append(f"<system-reminder>A {block['type']} file is returned as [{identifier}]")
    return "\n".join(lines)


def format_history(history: list[dict]) -> list[dict]:
    formatted = []
    for msg in history:
        if msg["role"] == "tool":
            content = convert_tool_result_to_string(msg["blocks"])
            formatted.append({"role": "tool", "tool_call_id": msg["id"], "content": content})
        else:
            formatted.append({"role": msg["role"], "content": msg["text"]})
    return formatted
