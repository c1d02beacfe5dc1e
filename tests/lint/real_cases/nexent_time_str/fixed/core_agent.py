"""Runs a task with the agent's configuration."""

from datetime import datetime

from openai import OpenAI

client = OpenAI()


class CoreAgent:
    def __init__(self, config: dict) -> None:
        self.config = config

    def run(self, task: str) -> str:
        time_str = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        messages = [
            {"role": "system", "content": self.config["system_prompt"]},
            {"role": "user", "content": f"[Current time: {time_str}]\n\n{task}"},
        ]
        reply = client.chat.completions.create(model=self.config["model"], messages=messages)
        return reply.choices[0].message.content or ""
