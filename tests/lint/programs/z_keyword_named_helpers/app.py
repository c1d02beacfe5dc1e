# A tracing wrapper times each request and records it on the span (no prompt), through a
# function and through a method; two callers send the time as the system message through the
# other helpers, and a third hands it to a voice library's constructor under
# `system_instructions=`, which the linter cannot see and takes for a system prompt.
import time

from scope import ask_noted, ask_with_asker, record_version, record_with_recorder
from voicekit import Assistant


def traced(call, span, args, kwargs):
    started = time.time()
    response = call(*args, **kwargs)
    record_version(span, started)
    return response


def traced_with_recorder(call, span, args, kwargs):
    started = time.time()
    response = call(*args, **kwargs)
    record_with_recorder(span, started)
    return response


def ask_timed(client, question):
    return ask_noted(client, question, f"sent at {time.time()}")  # PC001: 50


def ask_timed_with_asker(client, question):
    return ask_with_asker(client, question, f"sent at {time.time()}")  # PC001: 55


def build_agent():
    return Assistant(name="helper", system_instructions=f"started at {time.time()}")  # PC001: 70
