# c) a source returned in module A ...
import time
from datetime import date, datetime

RULES = "Answer in one paragraph."


def current_context() -> str:
    return f"Local time: {datetime.now():%H:%M}."


def dated_rules() -> str:
    return f"{RULES} Today is {date.today().isoformat()}."


def stable_rules() -> str:
    return RULES


def passthrough(text: str, stamp: float = 0.0) -> str:
    return text.strip()


def session_id() -> str:
    return f"s-{time.time()}"
