# Hook context kept per thread: the thread id is only the key it is stored and drained by.
import threading

_PENDING: dict[str, list[str]] = {}
_LOCK = threading.Lock()


def add_context(thread_id: str, text: str) -> None:
    with _LOCK:
        _PENDING.setdefault(thread_id, []).append(text)


def take_pending_context(thread_id: str) -> str:
    with _LOCK:
        items = _PENDING.pop(thread_id, [])
    return "\n".join(items)


def tagged_context(thread_id: str) -> str:
    # the look-alike: the id itself is written into the text
    return f"<context thread={thread_id}>\n{take_pending_context(thread_id)}"
