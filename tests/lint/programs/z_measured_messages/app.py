import datetime

from executor import Executor, OpenAIExecutor


def prompt() -> str:
    return f"You help. Now: {datetime.datetime.now().isoformat()}"


def answer(question: str, transport):
    return Executor(prompt(), transport).run(question)


def answer_openai(question: str):
    return OpenAIExecutor(prompt()).run(question)  # PC001: 11
