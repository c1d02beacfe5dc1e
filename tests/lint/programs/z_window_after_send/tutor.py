"""A tutor whose reply helper is handed the whole history each turn: a window taken after the
request (in the handler of a failed request, on a name the caller never sees again) reaches no
request of a later turn; a window taken before a request moves every turn."""

import anthropic

KEEP = 6


class ReplyFailed(Exception):
    pass


class Tutor:
    def __init__(self) -> None:
        self.client = anthropic.Anthropic()
        self.lessons: list[dict] = []

    def answer(self, history: list) -> str:
        try:
            reply = self.client.messages.create(model="m", max_tokens=300, messages=history)
        except anthropic.APIStatusError:
            history = history[-KEEP:]
            raise ReplyFailed(f"gave up after {len(history)} turns") from None
        return reply.content[0].text

    def answer_or_retry(self, history: list) -> str:
        try:
            reply = self.client.messages.create(model="m", max_tokens=300, messages=history)
        except anthropic.APIStatusError:
            history = history[-KEEP:]  # PC016: 12
            reply = self.client.messages.create(model="m", max_tokens=300, messages=history)
        return reply.content[0].text

    def answer_recent(self, history: list) -> str:
        history = history[-KEEP:]  # PC016: 8
        reply = self.client.messages.create(model="m", max_tokens=300, messages=history)
        return reply.content[0].text

    def drill(self, questions: list[str], history: list) -> None:
        for question in questions:
            history.append({"role": "user", "content": question})
            reply = self.client.messages.create(model="m", max_tokens=300, messages=history)
            history.append({"role": "assistant", "content": reply.content[0].text})
            history = history[-KEEP:]  # PC016: 12

    def run(self) -> None:
        while True:
            self.lessons.append({"role": "user", "content": input()})
            self.answer(self.lessons)
            self.answer_or_retry(self.lessons)
            self.answer_recent(self.lessons)
