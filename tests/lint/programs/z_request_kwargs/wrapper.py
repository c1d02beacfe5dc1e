# A model wrapper that builds its request as a dict of keyword arguments: the model is the
# agent's (or the wrapper's own), the messages are the stored history (copied only when there
# is one, under an `if` on it) plus the new input, and the dict is then given provider keys
# under constant keys, stripped of unset values by a loop that copies each entry it keeps, and
# for one provider given the model name without its prefix, before it is splatted into the
# call. The model never depends on the `if` that chose the messages: no finding. Beside it: a
# model picked by the size of the question into the dict literal, still chosen per request
# after the same stores and copying loop, and a larger model stored under "model" for long
# questions among other stores (PC011).
import os

from openai import OpenAI

client = OpenAI()
UNSET = object()


class Wrapper:
    def __init__(self, model: str) -> None:
        self.model = model
        self.history: list[dict] = []

    def _kwargs(self, new: list[dict], settings, model: str) -> dict:
        messages = []
        if self.history:
            for message in self.history:
                kept = message.copy()
                messages.append(kept)
        messages.extend(new)
        kwargs = {
            "model": model,
            "messages": messages,
            "temperature": settings.temperature if settings.temperature is not None else UNSET,
            "store": UNSET,
        }
        if "/" in model:
            kwargs["api_key"] = os.getenv("PROVIDER_API_KEY")
            kwargs.pop("store", None)
        if settings.effort:
            kwargs["reasoning_effort"] = settings.effort
        return kwargs

    def fetch(self, new: list[dict], settings) -> object:
        """The agent's model or ours: fixed for the conversation."""
        chosen = settings.agent_model if settings.agent_model else self.model
        kwargs = self._kwargs(new, settings, chosen)
        kept = {}
        for key, value in kwargs.items():
            if value is not UNSET:
                kept[key] = value
        kwargs = kept
        if str(kwargs["model"]).startswith("cloud/"):
            kwargs["model"] = kwargs["model"].replace("cloud/", "")
        return client.chat.completions.create(**kwargs)

    def fetch_inline(self, new: list[dict], settings) -> object:
        """The same steps written out in one method."""
        messages = []
        if self.history:
            for message in self.history:
                messages.append(message.copy())
        messages.extend(new)
        kwargs = {"model": self.model, "messages": messages, "store": UNSET}
        if settings.provider:
            kwargs["api_base"] = os.getenv("PROVIDER_BASE")
        kept = {}
        for key, value in kwargs.items():
            if value is UNSET:
                continue
            kept[key] = value
        kwargs = kept
        kwargs["model"] = kwargs["model"].replace("cloud/", "")
        return client.chat.completions.create(**kwargs)

    def fetch_routed(self, question: str, settings) -> object:
        """A small model for short questions: chosen per request, through the same steps."""
        messages = [*self.history, {"role": "user", "content": question}]
        kwargs = {
            "model": "gpt-4o-mini" if len(question) < 200 else "gpt-4o",
            "messages": messages,
            "store": UNSET,
        }
        if settings.provider:
            kwargs["api_base"] = os.getenv("PROVIDER_BASE")
        kept = {}
        for key, value in kwargs.items():
            if value is not UNSET:
                kept[key] = value
        kept["model"] = kept["model"].replace("cloud/", "")  # PC011: 24
        return client.chat.completions.create(**kept)

    def fetch_routed_by_store(self, question: str, settings) -> object:
        """The large model stored under its key for long questions, among other stores."""
        messages = [*self.history, {"role": "user", "content": question}]
        kwargs = {"model": self.model, "messages": messages}
        if settings.provider:
            kwargs["api_base"] = os.getenv("PROVIDER_BASE")
        kwargs["model"] = "gpt-4o" if len(question) > 2000 else self.model  # PC011: 26
        kwargs["user"] = os.getenv("PROVIDER_USER")
        return client.chat.completions.create(**kwargs)
