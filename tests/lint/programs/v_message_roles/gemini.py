# A Gemini-style formatter: the system instruction is gathered from the system-role messages.
from copy import deepcopy

from google import genai
from google.genai import types

client = genai.Client()


def format_for_gemini(original_messages: list, system_prompt: str = "") -> tuple[list, str]:
    messages = deepcopy(original_messages)
    for message in messages.copy():
        if message.role == "system":
            system_prompt += "\n\n" + str(message.content)
            messages.remove(message)
    contents = []
    for message in reversed(messages):
        contents.append(types.Content(role=message.role, parts=[message.content]))
    return contents, system_prompt


def format_every_message(original_messages: list) -> tuple[list, str]:
    # no filter on the role: every message's text becomes the system instruction
    system_prompt = ""
    for message in original_messages:
        system_prompt += message["content"]
    return [], system_prompt


def send(messages: list):
    contents, system = format_for_gemini(messages)
    return client.models.generate_content(
        model="gemini-2.5-flash",
        contents=contents,
        config=types.GenerateContentConfig(system_instruction=system),
    )


def send_all(messages: list):
    contents, system = format_every_message(messages)
    return client.models.generate_content(
        model="gemini-2.5-flash",
        contents=contents,
        config=types.GenerateContentConfig(system_instruction=system),
    )
