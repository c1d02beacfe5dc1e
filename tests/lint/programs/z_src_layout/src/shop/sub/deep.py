# two levels up from a namespace package's subfolder: ..utils is shop.utils
from anthropic import Anthropic

from ..utils import now_text

client = Anthropic()


def answer(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=f"Rules. Time: {now_text()}",  # PC001: 31
        messages=[{"role": "user", "content": question}],
    )
