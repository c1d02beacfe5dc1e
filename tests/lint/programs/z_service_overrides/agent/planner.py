# A planner that tells the model the current time, to the second, in the system message it
# sends every turn: through a service picked per configuration (found, the chain naming the
# Anthropic service's call), and look-alikes that send no time or reach no sink.
import datetime
import logging

from .base import CompletionService, Greeter
from .llm import (
    ConfiguredLLM,
    DeferredLLM,
    InjectedLLM,
    RecordingLLM,
    UntypedLLM,
    format_chat_message,
)

logger = logging.getLogger(__name__)


def env_context():
    now = datetime.datetime.now()
    return f"- Current time: {now.strftime('%Y-%m-%d %H:%M:%S')}"


def compose(question):
    return [
        format_chat_message(role="system", message=f"You plan the next step.\n{env_context()}"),
        format_chat_message(role="user", message=question),
    ]


class Planner:
    def __init__(self, llm: ConfiguredLLM):
        self.llm = llm

    def reply(self, question):
        messages = compose(question)
        return self.llm.chat(messages)  # PC001: 29


class StreamingPlanner:
    def __init__(self, llm: InjectedLLM):
        self.llm = llm

    def reply(self, question):
        messages = compose(question)
        return "".join(self.llm.chat_stream(messages))  # PC001: 44

    def reply_logged(self, question):
        # the time is only logged: the system message is fixed
        logger.info("planning at %s", env_context())
        messages = [
            format_chat_message(role="system", message="You plan the next step."),
            format_chat_message(role="user", message=question),
        ]
        return "".join(self.llm.chat_stream(messages))


def ask(service: CompletionService, question):
    return service.complete(compose(question))  # PC001: 28


def ask_untyped(service, question):
    # the object's class is not known: nothing is proven
    return service.complete(compose(question))


def record(llm: RecordingLLM, question):
    # no override of Transcript.write sends the messages anywhere
    return llm.record(compose(question))


def ask_registry(llm: UntypedLLM, question):
    # the service comes from a registry the linter cannot see
    return llm.chat(compose(question))


def greet(question):
    # a Greeter built here runs Greeter.greet, not an override
    return Greeter().greet(compose(question))


def queue(llm: DeferredLLM, question):
    return llm.later(compose(question))
