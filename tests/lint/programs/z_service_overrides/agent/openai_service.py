# OpenAI's service: the message list is sent whole, its roles unknown here.
import openai

from .base import CompletionService


class OpenAIService(CompletionService):
    def __init__(self, model):
        self.model = model
        self.client = openai.OpenAI()

    def complete(self, messages, temperature=None):
        reply = self.client.chat.completions.create(
            model=self.model, messages=messages, temperature=temperature
        )
        return reply.choices[0].message.content
