# The seconds clock of read_instruction() reaches the system message of every request (a class
# whose body fixes the role "system", built with only its content); the same class with fixed
# rules, the clock in a user message, a record whose role is only a constructor's default, and
# a console notice of a fixed system role that no module turns into a request stay silent.
from .cell import ChatRequest, SystemMessage, UserMessage
from .display import Notice
from .instruction import read_instruction, read_rules, time_now


class Banner:
    def __init__(self, role: str = "system", content: str = "") -> None:
        self.role = role
        self.content = content


async def answer(session, history: list, text: str):
    messages = [SystemMessage(content=read_instruction())]  # PC001: 38
    messages.extend(history)
    messages.append(UserMessage(content=text))
    return await ChatRequest(messages=messages).send(session, "https://api.example.com/v1")


async def answer_fixed(session, history: list, text: str):
    messages = [SystemMessage(content=read_rules()), *history]
    messages.append(UserMessage(content=f"{time_now()}: {text}"))
    return await ChatRequest(messages=messages).send(session, "https://api.example.com/v1")


def banner() -> Banner:
    return Banner(content=f"Started at {time_now()}")


def notice() -> None:
    Notice(content=f"Started at {time_now()}").show()
