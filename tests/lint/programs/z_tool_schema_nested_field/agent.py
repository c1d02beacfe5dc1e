# a request holds a box whose schema is a dict; a helper reads box.schema["text"] of the box
# its caller passes as request.title, so the time in that text reaches the system prompt
import time

from openai import OpenAI

client = OpenAI()


class Box:
    def __init__(self, schema):
        self.schema = schema


class Request:
    def __init__(self, title):
        self.title = title


def describe(box):
    return box.schema["text"]


def system_prompt(request):
    return "You help with " + describe(request.title)


def answer(question):
    request = Request(Box({"text": f"notes of {time.time()}", "id": "x"}))
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": system_prompt(request)},  # PC001: 42
            {"role": "user", "content": question},
        ],
    )
