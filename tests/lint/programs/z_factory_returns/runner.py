"""Two runners: one sends the prompt it is given as the system message, the other sends a fixed
system message and puts what it is given into the newest user turn."""

from __future__ import annotations

import litellm

FIXED_SYSTEM = "You check the health of a service and answer in three lines."


class Runner:
    def __init__(self, steps: int, model: str) -> None:
        self.steps = steps
        self.model = model

    def ask(self, system_prompt: str, question: str):
        messages = [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": question},
        ]
        return litellm.completion(model=self.model, messages=messages)


class QuietRunner:
    def __init__(self, model: str) -> None:
        self.model = model

    def ask(self, note: str, question: str):
        messages = [
            {"role": "system", "content": FIXED_SYSTEM},
            {"role": "user", "content": f"{note}\n\n{question}"},
        ]
        return litellm.completion(model=self.model, messages=messages)
