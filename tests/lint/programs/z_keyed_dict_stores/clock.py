# Helpers that store the time under one key of a caller's context dict.
import datetime


def stamp_call(context: dict) -> None:
    caller = context.setdefault("caller", {})
    caller["started_at"] = datetime.datetime.now().strftime("%H:%M:%S")


def stamp_flat(context: dict) -> None:
    context["started_at"] = datetime.datetime.now().isoformat()
