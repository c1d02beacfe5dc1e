# a module of the package whose name is also a standard library module's
import time


def capwords(text: str) -> str:
    return f"{text} {time.time()}"
