# Raw HTTP posts of a JSON body to a vendor endpoint are sinks; other posts are not.
import uuid
from datetime import datetime

import httpx
import requests

ANTHROPIC = "https://api.anthropic.com/v1/messages"


def ask(question: str):
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": f"Now: {datetime.now():%H:%M}",  # PC001: 26
        "messages": [{"role": "user", "content": question}],
    }
    return httpx.post(ANTHROPIC, json=body, headers={"x-api-key": "k"})


def ask_openai(question: str):
    return requests.post(
        "https://api.openai.com/v1/responses",
        json={
            "model": "gpt-5",
            "input": question,
            "prompt_cache_key": str(uuid.uuid4()),  # PC013: 32
        },
    )


def count(question: str):
    # counting tokens caches nothing
    return httpx.post(
        "https://api.anthropic.com/v1/messages/count_tokens",
        json={"model": "m", "system": f"Now: {datetime.now():%H:%M}", "messages": []},
    )


def webhook(question: str):
    # not a vendor endpoint
    return httpx.post("https://hooks.example.com/log", json={"system": f"{datetime.now()}"})
