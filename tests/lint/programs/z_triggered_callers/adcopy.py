# An LLM wrapper whose argument becomes the whole system prompt.
import anthropic

client = anthropic.Anthropic()


def write_whole(text: str):
    return client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=1,
        system=text,
        messages=[{"role": "user", "content": "Write the ad."}],
    )
