# A middle module that hands its caller's value to those helpers under the system-like
# keyword, given nothing but its own parameters.
from attributes import (
    InstructedAsker,
    SpanRecorder,
    apply_agent_version_attributes,
    ask_with_instructions,
)


def record_version(span, started):
    return apply_agent_version_attributes(span, system_instructions=started, primary_model="m")


def record_with_recorder(span, started):
    recorder = SpanRecorder()
    return recorder.apply(span, system_instructions=started)


def ask_noted(client, question, note):
    return ask_with_instructions(client, question, system_instructions=note)


def ask_with_asker(client, question, note):
    asker = InstructedAsker(client)
    return asker.ask(question, system_instructions=note)
