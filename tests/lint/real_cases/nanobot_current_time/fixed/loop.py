"""The agent loop: one chat completion per turn."""

from openai import OpenAI

from .context import ContextBuilder

client = OpenAI()


def run_turn(builder: ContextBuilder, history: list[dict], text: str) -> str:
    reply = client.chat.completions.create(
        model="gpt-5-mini", messages=builder.build_messages(history, text)
    )
    return reply.choices[0].message.content or ""
