"""The tools an agent exposes: function tools and toolsets, flattened into one context."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FunctionTool:
    name: str
    description: str
    parameters: dict[str, Any]


class Toolset:
    def __init__(self) -> None:
        self.tools: list[FunctionTool] = []


class ToolContext:
    def __init__(self, tools: Sequence[FunctionTool | Toolset]) -> None:
        self.update_tools(tools)

    def update_tools(self, tools: Sequence[FunctionTool | Toolset]) -> None:
        self._fnc_tools_map: dict[str, FunctionTool] = {}

        def add_tool(tool: FunctionTool | Toolset) -> None:
            if isinstance(tool, Toolset):
                for inner in tool.tools:
                    add_tool(inner)
            elif tool.name not in self._fnc_tools_map:
                self._fnc_tools_map[tool.name] = tool

        for tool in tools:
            add_tool(tool)

    def parse_function_tools(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in self._fnc_tools_map.values()
        ]
