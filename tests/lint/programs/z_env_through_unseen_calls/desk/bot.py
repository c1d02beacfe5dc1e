# Values computed once at import, from the machine: the working folder written into the system
# text is found; the user name handed to a library call whose result is that library's entry
# (not the name) is an unproven flow, shown only by --explain.
import os

import anthropic
import keyring

client = anthropic.Anthropic()

ENTRY = keyring.get_password("desk", os.getenv("DESK_USER"))
WORKDIR = f"You work in {os.getcwd()}."


def ask(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=[{"type": "text", "text": f"{WORKDIR} Signed: {ENTRY}"}],  # PC017: 44
        messages=[{"role": "user", "content": question}],
    )
