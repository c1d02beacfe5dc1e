# e) kwargs dicts splatted into an SDK call
import time

import openai

client = openai.OpenAI()


def ask(msgs: list):
    kwargs = {"model": "gpt-5", "messages": msgs, "prompt_cache_key": f"k-{time.time()}"}  # PC013: 70
    return client.chat.completions.create(**kwargs)


def ask_later_key(msgs: list):
    kwargs = {"model": "gpt-5", "messages": msgs}
    kwargs["prompt_cache_key"] = f"k-{time.time()}"  # PC013: 33
    return client.chat.completions.create(**kwargs)


def ask_stable(msgs: list, user_id: str):
    kwargs = {"model": "gpt-5", "messages": msgs, "prompt_cache_key": f"user-{user_id}"}
    return client.chat.completions.create(**kwargs)
