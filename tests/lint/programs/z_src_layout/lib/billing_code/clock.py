import time


def stamp() -> str:
    return str(time.time())
