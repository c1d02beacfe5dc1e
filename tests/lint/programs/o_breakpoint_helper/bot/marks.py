# A breakpoint helper in one module, called once before a tool loop in another (PC018), or
# inside the loop, where it moves with the newest message.
EPHEMERAL = {"type": "ephemeral"}


def mark_last_user(messages: list) -> None:
    for i in range(len(messages) - 1, -1, -1):
        entry = messages[i]
        if entry["role"] == "user" and isinstance(entry["content"], str):
            entry["content"] = [{"type": "text", "text": entry["content"], "cache_control": EPHEMERAL}]
            return
