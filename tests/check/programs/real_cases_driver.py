"""Drive the runnable reproductions of tests/lint/real_cases/ as programs:
`python real_cases_driver.py bad|fixed|both CASE...`.

The reproductions trim each project's prompt to a few lines; a real one is far longer. The
driver passes a long user-supplied part (a workspace description, a duty, a persona, the
instructions) so that each prompt reaches the model's minimum cacheable prefix, as the real
prompts do; it never changes the reproduction's code.
"""

import asyncio
import datetime
import importlib
import sys
from pathlib import Path

from handbook import INSTRUCTIONS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lint" / "real_cases"))


def load(case, side, module):
    return importlib.import_module(f"{case}.{side}.{module}")


def nanobot_current_time(side):
    context = load("nanobot_current_time", side, "context")
    loop = load("nanobot_current_time", side, "loop")
    builder = context.ContextBuilder(INSTRUCTIONS)
    history = []
    for text in ("Hello", "What next?"):
        answer = loop.run_turn(builder, history, text)
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]


def nexent_time_str(side):
    agent_info = load("nexent_time_str", side, "agent_info")
    core_agent = load("nexent_time_str", side, "core_agent")
    config = agent_info.create_agent_config(INSTRUCTIONS, "helper", "user-7")
    core_agent.CoreAgent(config).run("Summarise the handbook.")


def hindsight_codex_uuid_key(side):
    codex = load("hindsight_codex_uuid_key", side, "codex_llm")
    llm = codex.CodexLLM("account-1", "gpt-5-codex")
    asyncio.run(llm.call(INSTRUCTIONS, [{"role": "user", "content": "hi"}]))


def nanobot_codex_cache_key(side):
    provider = load("nanobot_codex_cache_key", side, "codex_provider").CodexProvider()
    messages = [
        {"role": "user", "content": "Open the project."},
        {"role": "assistant", "content": "Opened."},
    ]
    for text in ("List the files.", "Read the first one."):
        messages.append({"role": "user", "content": text})
        messages.append({"role": "assistant", "content": provider.chat(INSTRUCTIONS, messages)})


def browser_use_cache_every_block(side):
    chat = load("browser_use_cache_every_block", side, "chat")
    serializer = load("browser_use_cache_every_block", side, "serializer")
    parts = [serializer.Part(f"Step {i}: the page shows item {i}.") for i in range(3)]
    messages = [
        serializer.Message("user", parts, cache=True),
        serializer.Message(
            "assistant", [serializer.Part("Noted."), serializer.Part("Next?")], cache=True
        ),
        serializer.Message("user", [serializer.Part("Click the first item.")], cache=True),
    ]
    chat.ChatAnthropic("claude-sonnet-4-5").invoke(INSTRUCTIONS, messages)


def clawbolt_datetime_section(side):
    core = load("clawbolt_datetime_section", side, "core")
    core.process_message("Europe/Berlin", INSTRUCTIONS, [], "When is my next deadline?")


def anton_minute_clock(side):
    session = load("anton_minute_clock", side, "session")
    if side == "bad":
        chat = session.ChatSession(INSTRUCTIONS)
    else:
        chat = session.ChatSession(INSTRUCTIONS, clock=datetime.datetime.now())
    asyncio.run(chat.turn("Plot last week's sales."))


if __name__ == "__main__":
    sides = ["bad", "fixed"] if sys.argv[1] == "both" else [sys.argv[1]]
    for side in sides:  # each side's modules load under their own names: both fit in one run
        for case in sys.argv[2:]:
            globals()[case](side)
