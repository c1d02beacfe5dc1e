"""Settings read from the environment once, and the runners they make for each request."""

from __future__ import annotations

import os


class Settings:
    def __init__(self, model: str = "small", steps: int = 4) -> None:
        self.model = model
        self.steps = steps

    @classmethod
    def from_env(cls):
        options = {}
        name = os.getenv("RUNNER_MODEL")
        if name is not None:
            options["model"] = name
        made = cls(**options)
        return made

    def make_runner(self, model: str | None = None):
        from runner import Runner

        return Runner(self.steps, model or self.model)

    def make_quiet_runner(self):
        from runner import QuietRunner

        return QuietRunner(self.model)
