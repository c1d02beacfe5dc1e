# Anthropic's service: the system message is moved into `system=`, the others follow.
import anthropic

from .base import CompletionService, Greeter, Transcript


class AnthropicService(CompletionService):
    client = None

    def __init__(self, model):
        self.model = model
        if AnthropicService.client is None:
            AnthropicService.client = anthropic.Anthropic()

    def complete(self, messages, temperature=None):
        system = None
        turns = []
        for message in messages:
            if message["role"] == "system":
                system = message["content"]
            else:
                turns.append({"role": message["role"], "content": message["content"]})
        request = {"model": self.model, "messages": turns, "max_tokens": 1024}
        if system:
            request["system"] = system
        reply = self.client.messages.create(**request)
        return reply.content[0].text


class FileTranscript(Transcript):
    def __init__(self, path):
        self.path = path

    def write(self, messages):
        with open(self.path, "a", encoding="utf-8") as out:
            for message in messages:
                out.write(f"{message['role']}: {message['content']}\n")


class CountingTranscript(Transcript):
    def write(self, messages):
        return len(messages)


class LoudGreeter(Greeter):
    def greet(self, messages):
        system = messages[0]["content"]
        return AnthropicService.client.messages.create(
            model="claude-sonnet-4-5", system=system, messages=messages[1:], max_tokens=64
        )
