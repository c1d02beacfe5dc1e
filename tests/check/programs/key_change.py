"""OpenAI ``prompt_cache_key`` across the turns of a conversation (the PC013 key-change
structure check, docs/check.md): each function is one call site; only ``history_key`` is
reported. Run with ``python key_change.py`` (official client, check's capture endpoint)."""

import hashlib
import json

import openai
from handbook import INSTRUCTIONS

MODEL = "gpt-4o-mini"
QUESTIONS = ("Is the shop open on Sunday?", "Do you ship abroad?", "Can I pay by card?")


def key_of(messages):
    return hashlib.sha256(json.dumps(messages).encode()).hexdigest()[:16]


def history_key(client):
    """The key hashed from the whole history: a new key every turn while each turn carries the
    previous one's prompt (turns 2 and 3 are reported, at this call site)."""
    messages = [{"role": "system", "content": INSTRUCTIONS}]
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        reply = client.chat.completions.create(
            model=MODEL, messages=messages, prompt_cache_key=key_of(messages)
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    return messages


def summarise(client, messages):
    """Carries history_key's last prompt under a key of its own, but from another call site (a
    different job, its own cache): not reported."""
    client.chat.completions.create(
        model=MODEL,
        messages=[*messages, {"role": "user", "content": "Summarise the conversation."}],
        prompt_cache_key="summaries",
    )


def conversation_key(client, conversation_id):
    """The fix: the key names the conversation, the same every turn."""
    messages = [{"role": "system", "content": INSTRUCTIONS}]
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        reply = client.chat.completions.create(
            model=MODEL, messages=messages, prompt_cache_key=f"conversation-{conversation_id}"
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})


def short_history_key(client):
    """A history key on prompts below the model's minimum cacheable length (1,024 tokens):
    nothing is cached, so nothing is routed away from a cache."""
    messages = [{"role": "system", "content": "Be brief."}]
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        reply = client.chat.completions.create(
            model=MODEL, messages=messages, prompt_cache_key=key_of(messages)
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})


if __name__ == "__main__":
    gpt = openai.OpenAI()
    summarise(gpt, history_key(gpt))
    conversation_key(gpt, "c-17")
    short_history_key(gpt)
