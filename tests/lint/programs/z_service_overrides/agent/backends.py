# A base class and its backends in one module: a backend passed in as the base class may be
# any of them, so the time the caller puts in `system` reaches Anthropic's `system=`; the
# Ollama backend only logs it, and an object of no known class proves nothing.
import abc
import datetime
import logging

import anthropic

client = anthropic.Anthropic()
logger = logging.getLogger(__name__)


class Backend(abc.ABC):
    @abc.abstractmethod
    def send(self, system, question): ...

    @abc.abstractmethod
    def note(self, text): ...


class ClaudeBackend(Backend):
    def send(self, system, question):
        return client.messages.create(
            model="claude-sonnet-4-5",
            system=system,
            messages=[{"role": "user", "content": question}],
            max_tokens=512,
        )

    def note(self, text):
        logger.info("claude: %s", text)


class LoggingBackend(Backend):
    def send(self, system, question):
        logger.info("%s / %s", system, question)

    def note(self, text):
        logger.info("log: %s", text)


def answer(backend: Backend, question):
    now = datetime.datetime.now()
    return backend.send(f"Answer briefly. Now: {now:%H:%M:%S}", question)  # PC001: 24


def answer_with_note(backend: Backend, question):
    now = datetime.datetime.now()
    backend.note(f"asked at {now:%H:%M:%S}")
    return backend.send("Answer briefly.", question)


def answer_anything(backend, question):
    now = datetime.datetime.now()
    return backend.send(f"Answer briefly. Now: {now:%H:%M:%S}", question)
