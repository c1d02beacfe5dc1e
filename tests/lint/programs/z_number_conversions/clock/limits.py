# A timeout read once at import from the environment, converted to a number and told in the
# system text: PC017 (info), as the text itself would be.
import os

import anthropic

TIMEOUT = float(os.getenv("CLOCK_TIMEOUT", "30"))
client = anthropic.Anthropic()


def ask(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Answer within {TIMEOUT:.0f} s.",  # PC017: 32
        messages=[{"role": "user", "content": question}],
    )
