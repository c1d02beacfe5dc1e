"""Two breakers in one request, and a look-alike with one: `python mixed_breakers.py`.

`set_tools_and_random_system` sends a tool list built from a set (its order follows the hash
seed) and a system message that ends with a random draw, so a perturbed run changes both; the
first difference is the tool list's order. `sorted_tools_and_random_system` sorts the same
tools: its only difference is the random draw. `time_and_set_in_system` writes the time and then
the same names from the set into one system message; `time_and_sorted_set_in_system` sorts them."""

import random
import time

import openai
from handbook import INSTRUCTIONS

GPT = "gpt-4o-mini"
TOOL_NAMES = {"search_docs", "get_weather", "send_email", "open_ticket"}


def tool(name):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def ask(client, names):
    client.chat.completions.create(
        model=GPT,
        tools=[tool(name) for name in names],
        messages=[
            {"role": "system", "content": f"{INSTRUCTIONS}\nShard {random.randrange(1000)}."},
            {"role": "user", "content": "hi"},
        ],
    )


def set_tools_and_random_system(client):
    ask(client, TOOL_NAMES)


def sorted_tools_and_random_system(client):
    ask(client, sorted(TOOL_NAMES))


def tell(client, names):
    client.chat.completions.create(
        model=GPT,
        messages=[
            {
                "role": "system",
                "content": f"Now {time.strftime('%H:%M:%S')}. Tools: {', '.join(names)}.\n"
                f"{INSTRUCTIONS}",
            },
            {"role": "user", "content": "hi"},
        ],
    )


def time_and_set_in_system(client):
    tell(client, TOOL_NAMES)


def time_and_sorted_set_in_system(client):
    tell(client, sorted(TOOL_NAMES))


if __name__ == "__main__":
    made = openai.OpenAI()
    set_tools_and_random_system(made)
    sorted_tools_and_random_system(made)
    time_and_set_in_system(made)
    time_and_sorted_set_in_system(made)
