# An OpenAI-style formatter: messages copied in a loop over reversed(messages), reversed back,
# then the first one moved to the instructions when its role is "system".
from copy import deepcopy

import openai

client = openai.OpenAI()


def format_for_api(raw_messages: list) -> list:
    formatted = []
    messages = deepcopy(raw_messages)
    for message in reversed(messages):
        formatted.append({"role": message.role, "content": message.content})
    formatted.reverse()
    return formatted


def send(messages: list):
    formatted = format_for_api(messages)
    instructions = None
    if formatted and formatted[0].get("role") == "system":
        instructions = formatted[0].get("content")
        formatted = formatted[1:]
    return client.responses.create(model="gpt-5", instructions=instructions, input=formatted)


def send_dicts(messages: list):
    system = ""
    for message in messages:
        if message["role"] == "system":
            system += message["content"]
    return client.responses.create(model="gpt-5", instructions=system, input=messages[1:])


def send_first(messages: list):
    # the look-alike: the first message is read after the test, whatever its role
    if messages[0]["role"] == "system":
        print("system message first")
    return client.responses.create(
        model="gpt-5", instructions=messages[0]["content"], input=messages[1:]
    )
