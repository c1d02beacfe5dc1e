# the same module imported relatively from a namespace package
from anthropic import Anthropic

from .utils import now_text

client = Anthropic()


def answer_relative(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system="You help shoppers. Now: " + now_text(),  # PC001: 44
        messages=[{"role": "user", "content": question}],
    )
