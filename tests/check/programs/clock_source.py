"""Module one of the clock's path: where the time is read."""

from datetime import datetime


def now_line() -> str:
    return "Current date and time: " + datetime.now().strftime("%Y-%m-%d %H:%M:%S")
