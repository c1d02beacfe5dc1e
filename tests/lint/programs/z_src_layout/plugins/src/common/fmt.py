import time


def label() -> str:
    return f"plugin {time.time_ns()}"
