"""An agent that sends its system prompt with every request of its loop, after the directives
it is given worked on it (each `step` receives the agent and edits its fields in place); its
question is the newest user turn, its timer fields are only compared or logged (invented)."""

import logging
import time
from datetime import datetime

import anthropic

log = logging.getLogger(__name__)


class Agent:
    system_prompt = "You are a careful assistant."

    def __init__(self, directives: list) -> None:
        self.client = anthropic.Anthropic()
        self.directives = directives
        self.messages: list[dict] = []
        self.question = ""
        self.started = time.time()
        self.last_seen = ""

    def loop(self):
        base = self.system_prompt
        while True:
            self.system_prompt = base
            for directive in self.directives:
                directive.step(self)
            if time.time() - self.started > 60:
                return None
            log.info("last seen %s", self.last_seen)
            reply = self.client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=512,
                system=self.system_prompt,
                messages=[*self.messages, {"role": "user", "content": self.question}],
            )
            if reply.stop_reason != "tool_use":
                return reply


def stamp(agent: Agent) -> None:
    """A helper of the agent's own module: the time to the minute, appended before a run."""
    agent.system_prompt += f"\nIt is {datetime.now():%H:%M}."  # PC001: 4
