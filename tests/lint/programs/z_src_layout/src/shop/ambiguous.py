# common.fmt is claimed by src/common/fmt.py and plugins/src/common/fmt.py: which one is
# imported depends on sys.path, so neither is assumed
from anthropic import Anthropic
from common.fmt import label

client = Anthropic()


def labelled(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system="Shop " + label(),
        messages=[{"role": "user", "content": question}],
    )
