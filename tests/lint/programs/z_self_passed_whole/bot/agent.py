import os
import time
from datetime import datetime

from bot.send import count, send


class Model:
    def __init__(self, region=None):
        self.region = region or os.environ.get("AWS_REGION") or "us-west-2"

    def estimate(self, question, system_prompt=None):
        return len(question) + len(system_prompt or "")


class Agent:
    """Hands itself to helpers that read only its prompt; its other fields (a model built
    with the machine's region, the time of its last call) are not sent."""

    def __init__(self):
        self.model = Model()
        self.prompt = "Answer briefly."
        self.last_call = 0.0

    def ask(self, question):
        self.last_call = time.time()
        count(self, question)
        return send(self, question)


class StampedAgent:
    """The look-alike: the field the helper reads holds the time of each request."""

    def __init__(self):
        self.model = Model()
        self.prompt = "Answer briefly."

    def ask(self, question):
        self.prompt = f"Answer briefly. Now: {datetime.now():%H:%M:%S}"
        return send(self, question)  # PC001: 20


def run(question):
    agent = Agent()
    return agent.ask(question)


def run_stamped(question):
    agent = StampedAgent()
    return agent.ask(question)
