import anthropic

from builder import stable_prompt, system_prompt

client = anthropic.Anthropic()


def ask(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        system=system_prompt(),  # PC001: 15
        messages=[{"role": "user", "content": question}],
    )


def ask_stable(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        system=stable_prompt(),
        messages=[{"role": "user", "content": question}],
    )
