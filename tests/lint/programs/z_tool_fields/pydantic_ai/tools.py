# A tool is sent as its name, description and the schema of its function's parameters; its
# retries, timeout and metadata stay with the application.
from collections.abc import Callable
from typing import Any


class Tool:
    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        metadata: dict | None = None,
    ):
        self.function = function
        self.name = name or function.__name__
        self.description = description
        self.max_retries = max_retries
        self.timeout = timeout
        self.metadata = metadata
