"""A reply service whose request options sit in one dict: an `if` on a per-turn value stores
one key of it, and the model is read from that dict."""

from openai import OpenAI

client = OpenAI()


class Replier:
    def __init__(self, model_name: str, options: dict) -> None:
        self.model_name = model_name
        self.options = options

    def reply_capped(self, messages: list, max_tokens: int | None = None, extra=None) -> str:
        # the cap is stored under its own key: the model popped from the dict is not chosen
        params = {**self.options}
        params.update(extra or {})
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        model = params.pop("model", self.model_name)
        out = client.chat.completions.create(model=model, messages=messages, **params)
        return out.choices[0].message.content

    def reply_indexed(self, messages: list, used_tokens: int) -> str:
        # the same with the model read by index after a store of another key
        params = dict(self.options)
        if used_tokens > 3000:
            params["temperature"] = used_tokens / 10000
        model = params["model"]
        out = client.chat.completions.create(model=model, messages=messages)
        return out.choices[0].message.content

    def reply_sized(self, messages: list, question: str, small_model: str) -> str:
        # the model key itself is stored under the `if`
        params = {**self.options}
        if len(question) < 200:
            params["model"] = small_model
        model = params.pop("model", self.model_name)
        out = client.chat.completions.create(model=model, messages=messages)  # PC011: 51
        return out.choices[0].message.content

    def reply_grown(self, messages: list, used_tokens: int) -> str:
        # a plain name chosen by the `if`
        model = self.model_name
        if used_tokens > 3000:
            model = "big"
        out = client.chat.completions.create(model=model, messages=messages)  # PC011: 51
        return out.choices[0].message.content
