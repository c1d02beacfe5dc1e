"""Chat handlers: the base class's ``__init__`` gets its store from another module's factory
and its methods read that store; the subclasses send the system prompt to Bedrock."""

from __future__ import annotations

import boto3
from store import make_store

PROMPT = "You are a shop assistant."
client = boto3.client("bedrock-runtime")


class BaseHandler:
    def __init__(self, session_id: str, text: str) -> None:
        self.session_id = session_id
        self.text = text
        self.store = make_store()

    def context(self) -> str:
        return f"\n\nContext:\n{self.store.context_text(self.session_id)}"

    def rules(self) -> str:
        return self.store.rules_text()

    def turns(self) -> list:
        return [{"role": "user", "content": [{"text": self.text}]}]


class OrderHandler(BaseHandler):
    def handle(self):
        system = PROMPT + self.context()
        return client.converse(
            modelId="m",
            messages=self.turns(),
            system=[{"text": system}],  # PC001: 29
        )


class SearchHandler(BaseHandler):
    def handle(self):
        context = self.store.context_text(self.session_id)
        return client.converse(
            modelId="m",
            messages=self.turns(),
            system=[{"text": f"{PROMPT}\n{context}"}],  # PC001: 42
        )


class RulesHandler(BaseHandler):
    def handle(self):
        return client.converse(
            modelId="m",
            messages=self.turns(),
            system=[{"text": PROMPT + self.rules()}],
        )


class TurnHandler(BaseHandler):
    def handle(self):
        return client.converse(
            modelId="m",
            messages=[{"role": "user", "content": [{"text": self.text + self.context()}]}],
            system=[{"text": PROMPT}],
        )
