# The completion service is chosen from the configuration at run time: a field set in
# branches to one vendor's service, or annotated with the base class and filled by a
# factory the linter cannot see; replies are streamed through a nested function.
from .anthropic_service import AnthropicService
from .base import CompletionService, Transcript
from .openai_service import OpenAIService


def format_chat_message(role, message, name=None):
    msg = {"role": role, "content": message}
    if name is not None:
        msg["name"] = name
    return msg


class ConfiguredLLM:
    def __init__(self, api_type: str, model: str):
        if api_type == "openai":
            self.service = OpenAIService(model)
        elif api_type == "anthropic":
            self.service = AnthropicService(model)
        else:
            raise ValueError(f"API type {api_type} is not supported")

    def chat(self, messages):
        return self.service.complete(messages)


class InjectedLLM:
    def __init__(self, injector, api_type: str):
        self.injector = injector
        self.service: CompletionService = self.injector.get(api_type)
        self.aliases = {}

    def chat_stream(self, messages, alias=None, smooth=True):
        def get_generator():
            if alias is not None:
                service = self.aliases[alias]
            else:
                service = self.service
            return service.complete(messages)

        if smooth:
            return self._smooth(get_generator)
        return get_generator()

    def _smooth(self, start):
        for chunk in start():
            yield chunk


class DeferredLLM:
    def __init__(self, service: CompletionService):
        self.service = service
        self.pending = []

    def later(self, messages):
        # the nested function is only queued here, never called: no request is proven
        def send_later():
            return self.service.complete(messages)

        self.pending.append(send_later)
        return len(self.pending)


class RecordingLLM:
    def __init__(self, transcript: Transcript):
        self.transcript = transcript

    def record(self, messages):
        return self.transcript.write(messages)


class UntypedLLM:
    def __init__(self, registry, api_type):
        self.service = registry.get(api_type)

    def chat(self, messages):
        return self.service.complete(messages)
