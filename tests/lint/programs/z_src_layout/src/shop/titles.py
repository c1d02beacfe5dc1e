# `import string` is the standard library's, not shop/string.py (which is shop.string)
import string

from anthropic import Anthropic
from shop import string as shop_string

client = Anthropic()


def titled(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=string.capwords("you help shoppers"),
        messages=[{"role": "user", "content": question}],
    )


def stamped(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system=shop_string.capwords("you help shoppers"),  # PC001: 15
        messages=[{"role": "user", "content": question}],
    )
