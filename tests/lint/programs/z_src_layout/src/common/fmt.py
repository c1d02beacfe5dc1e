import time


def label() -> str:
    return f"v{time.time()}"
