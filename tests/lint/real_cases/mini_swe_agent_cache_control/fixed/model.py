"""Query the model through litellm with cache breakpoints set."""

import litellm

from .cache_control import set_cache_control


def query(messages: list[dict]) -> str:
    messages = set_cache_control(messages)
    response = litellm.completion(model="anthropic/claude-sonnet-4-6", messages=messages)
    return response.choices[0].message.content
