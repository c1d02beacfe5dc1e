import time


def time_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())


def read_instruction() -> str:
    return f"Now={time_now()}\nYou are a helpful bot."


def read_rules() -> str:
    return "You are a helpful bot."
