# Callers: the time is in the newest user turn, or in the system message.
from datetime import datetime

import gemini
import responses
from builder import build, build_by_kind, build_dicts

SYSTEM = "Answer briefly."


def ask_gemini(query: str, history: list):
    return gemini.send(build(SYSTEM, query, history))


def ask_gemini_stamped(query: str, history: list):
    return gemini.send(build(f"Now: {datetime.now():%H:%M}", query, history))  # PC001: 37


def ask_gemini_unfiltered(query: str):
    return gemini.send_all(build_dicts(SYSTEM, query))  # PC001: 27


def ask_responses(query: str, history: list):
    return responses.send(build(SYSTEM, query, history))


def ask_responses_stamped(query: str, history: list):
    return responses.send(build(f"Now: {datetime.now():%H:%M}", query, history))  # PC001: 40


def ask_dicts(query: str):
    return responses.send_dicts(build_dicts(SYSTEM, query))


def ask_by_kind(query: str, kind: str):
    return responses.send_dicts(build_by_kind(SYSTEM, query, kind))  # PC001: 32


def ask_first(query: str):
    return responses.send_first(build_dicts(SYSTEM, query)[::-1])  # PC001: 32
