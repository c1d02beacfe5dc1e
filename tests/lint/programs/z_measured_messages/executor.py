"""Executors that keep a system prompt and size the history by its tokens before each call."""

import openai

client = openai.OpenAI()


def estimate_message_tokens(message: dict[str, str]) -> int:
    return len(message["content"]) // 3


class Executor:
    """Counts its system prompt to trim the history; sends through a transport of its own."""

    def __init__(self, system_prompt: str, transport) -> None:
        self.system_prompt = system_prompt
        self.transport = transport
        self.messages: list[dict[str, str]] = []

    def _estimate_message_tokens(self, message: dict[str, str]) -> int:
        return len(message["content"]) // 3

    def _trim_messages(self, window: int) -> None:
        used = self._estimate_message_tokens({"role": "system", "content": self.system_prompt})
        while self.messages and used + 50 * len(self.messages) > window:
            self.messages.pop(0)

    def run(self, question: str):
        self.messages.append({"role": "user", "content": question})
        self._trim_messages(8000)
        return self.transport.post(system=self.system_prompt, messages=self.messages)


class OpenAIExecutor:
    """The same trimming, and it sends the prompt as the request's system message."""

    def __init__(self, system_prompt: str) -> None:
        self.system_prompt = system_prompt
        self.messages: list[dict[str, str]] = []

    def _trim_messages(self, window: int) -> None:
        used = estimate_message_tokens({"role": "system", "content": self.system_prompt})
        while self.messages and used + 50 * len(self.messages) > window:
            self.messages.pop(0)

    def run(self, question: str):
        self._trim_messages(8000)
        return client.chat.completions.create(
            model="gpt-5",
            messages=[
                {"role": "system", "content": self.system_prompt},
                *self.messages,
                {"role": "user", "content": question},
            ],
        )
