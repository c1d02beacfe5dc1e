# The project's base classes: a chat completion service whose `complete` each vendor's
# service overrides, and a transcript sink whose `write` no override sends anywhere.
import abc


class CompletionService(abc.ABC):
    @abc.abstractmethod
    def complete(self, messages, temperature=None):
        """Send `messages` (a list of {"role", "content"} dicts); returns the reply text."""
        raise NotImplementedError


class Transcript(abc.ABC):
    @abc.abstractmethod
    def write(self, messages):
        raise NotImplementedError


class Greeter:
    # a base method with a body of its own: an object built as a Greeter runs this one
    def greet(self, messages):
        return len(messages)
