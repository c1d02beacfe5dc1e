import anthropic


def query(system_message: str, model: str):
    reply = anthropic.Anthropic().messages.create(
        model=model,
        max_tokens=500,
        system=system_message,
        messages=[{"role": "user", "content": "Go."}],
    )
    return reply.content[0].input
