# Tool classes of the SDK look-alike: a function tool is sent as its name, description and
# parameter schema; a shell tool as its environment and allowed callers. What runs the tool
# (a callable, an executor and the state it keeps) stays on the machine.
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FunctionTool:
    name: str
    description: str
    params_json_schema: dict
    on_invoke_tool: Callable[..., Any]
    strict_json_schema: bool = True
    timeout_seconds: float | None = None


@dataclass
class ShellTool:
    executor: Any = None
    name: str = "shell"
    needs_approval: bool = False
    environment: dict | None = None
    allowed_callers: list | None = field(default=None, kw_only=True)


@dataclass
class LocalShellTool:
    executor: Any = None
