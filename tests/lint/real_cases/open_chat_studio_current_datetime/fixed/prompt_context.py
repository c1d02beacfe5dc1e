"""Values a bot author can reference as {placeholders} in a prompt template."""

from .timeutil import pretty_date, utc_now


class PromptTemplateContext:
    def __init__(self, tz: str, participant: str) -> None:
        self.tz = tz
        self.participant = participant
        self._factories = {"participant_name": self.get_participant_name}

    def get_participant_name(self) -> str:
        return self.participant

    def get_current_datetime(self) -> str:
        return pretty_date(utc_now(), self.tz)

    def get_context(self, variables: set[str]) -> dict[str, str]:
        return {name: self._factories[name]() for name in variables if name in self._factories}
