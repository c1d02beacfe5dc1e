"""Tools, hooks and commands, registered by name; what they yield is handed, one message at a
time, to the loop that writes it into the conversation's log (invented)."""

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from .messages import Message

HOOKS: list[Callable] = []
COMMANDS: dict[str, Callable] = {}


@dataclass
class Tool:
    name: str
    execute: Callable


def register_hook(hook: Callable) -> None:
    HOOKS.append(hook)


def command(name: str) -> Callable:
    def wrap(func: Callable) -> Callable:
        COMMANDS[name] = func
        return func

    return wrap


def _run_one(cmd: str):
    # the tool's output, stamped with the time it ran: a turn written once into the log
    yield Message("system", f"[{time.strftime('%H:%M:%S')}] ran {cmd}")


def run_shell(cmd: str):
    for part in cmd.split(";"):
        yield from _run_one(part)


def clock_hook(elapsed: int):
    note = Message("system", f"The time is now {datetime.now():%H:%M} ({elapsed} min in)")
    yield note


@command("checks")
def watch_checks(states: str):
    for state in states.split(","):
        yield Message(role="system", content=f"[{time.strftime('%H:%M:%S')}] checks: {state}")


def with_lock(lock: object) -> Callable:
    def wrap(func: Callable) -> Callable:
        return func

    return wrap


def confirm_then(cmd: str, execute_fn: Callable):
    if input(f"Run {cmd}? ") == "y":
        yield from execute_fn(cmd)


def _run_logged(cmd: str):
    yield Message("system", f"Logged at {time.time()}: {cmd}")


def run_confirmed(cmd: str):
    # handed on through a callback that returns the generator of turns
    def execute_fn(c: str):
        return _run_logged(c)

    yield from confirm_then(cmd, execute_fn=execute_fn)


@with_lock(uuid)
def open_session(name: str) -> Message:
    return Message("system", f"Session {name}-{uuid.uuid4().hex[:6]} started at {time.time()}")


def close_session(name: str) -> Message:
    return Message("system", f"Session {name} closed at {time.time()}")


def execute_session(command: str, name: str = "main"):
    if command == "open":
        yield open_session(name)
    elif command == "close":
        yield close_session(name)
    else:
        yield Message("system", f"Unknown command: {command}")


@dataclass
class Agent:
    system_prompt: Callable


def clock_prompt():
    # handed on as the system prompt's maker
    yield Message("system", f"Clock: {time.time()}")  # PC001: 38


def prompt_clock():
    # a section of the system prompt, composed by a builder called by name
    yield Message("system", f"Now: {time.time()}")  # PC001: 36


def prompt_sections():
    yield Message("system", "You run shell commands.")
    yield from prompt_clock()


TOOLS = [Tool("shell", run_shell), Tool("session", execute_session), Tool("ok", run_confirmed)]
register_hook(clock_hook)
AGENT = Agent(system_prompt=clock_prompt)
