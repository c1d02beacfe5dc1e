# Shape 1: a timer that is only ever compared taints nothing; a deadline written into the
# system prompt is still found.
import time

import anthropic

client = anthropic.Anthropic()
SYSTEM = "You keep the prompt cache warm."


class Warmer:
    def __init__(self, delay: float):
        self.delay = delay
        self.next_warm = 0.0
        self.system = SYSTEM

    def tick(self, question: str):
        if time.time() > self.next_warm:
            self.warm()
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=256,
            system=self.system,
            messages=[{"role": "user", "content": question}],
        )

    def warm(self):
        self.next_warm = time.time() + self.delay
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1,
            system=self.system,
            messages=[{"role": "user", "content": "ping"}],
        )


def ask_with_deadline(question: str, delay: float):
    deadline = time.time() + delay  # PC001: 15
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Answer before {deadline}.",
        messages=[{"role": "user", "content": question}],
    )
