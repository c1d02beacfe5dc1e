"""Runs a task with the agent's configuration."""

from openai import OpenAI

client = OpenAI()


class CoreAgent:
    def __init__(self, config: dict) -> None:
        self.config = config

    def run(self, task: str) -> str:
        messages = [
            {"role": "system", "content": self.config["system_prompt"]},
            {"role": "user", "content": task},
        ]
        reply = client.chat.completions.create(model=self.config["model"], messages=messages)
        return reply.choices[0].message.content or ""
