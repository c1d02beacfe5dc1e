# One time value reaching the prompt along several paths (see app.py).
import time

import vendorlib


def stamp() -> str:
    return time.strftime("%H:%M:%S")


def morning() -> str:
    return "morning " + stamp()


def evening() -> str:
    return "evening " + stamp()


def late_evening() -> str:
    return "late " + evening()


def wrapped() -> str:
    return vendorlib.decorate(stamp())
