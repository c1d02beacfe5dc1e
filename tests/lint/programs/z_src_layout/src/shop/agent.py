# shop.utils is src/shop/utils.py: src/ is a source root, shop/ a namespace package
from anthropic import Anthropic
from shop.utils import now_text

client = Anthropic()


def answer(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system="You help shoppers. Now: " + now_text(),  # PC001: 44
        messages=[{"role": "user", "content": question}],
    )
