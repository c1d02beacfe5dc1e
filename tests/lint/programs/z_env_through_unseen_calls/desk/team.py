# A member built once at import from a token in the environment: its role is read into the
# system text, but the token reaches the member only through a constructor the linter cannot
# see (unproven); a signature written from the user name is found.
import os

import anthropic

from .factory import make_member, signature

client = anthropic.Anthropic()
MEMBER = make_member(os.getenv("DESK_TOKEN"))
SIGNED = signature(os.getenv("DESK_USER"))


def brief(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"You are {MEMBER.role}. {SIGNED}",  # PC017: 41
        messages=[{"role": "user", "content": question}],
    )
