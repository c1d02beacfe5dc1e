"""Tool catalogs: tools and toolsets flattened by a nested helper into a name-keyed dict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .toolsets import FunctionTool, Toolset


def _schema(tool: FunctionTool) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool.name, "parameters": tool.parameters}}


class Catalog:
    """In the order the caller listed its tools and toolsets."""

    def __init__(self, tools: Sequence[FunctionTool | Toolset]) -> None:
        self._by_name: dict[str, FunctionTool] = {}

        def add(tool: FunctionTool | Toolset) -> None:
            if isinstance(tool, Toolset):
                for inner in tool.tools:
                    add(inner)
            else:
                self._by_name[tool.name] = tool

        for tool in tools:
            add(tool)

    def schemas(self) -> list[dict[str, Any]]:
        return [_schema(tool) for tool in self._by_name.values()]


class SortedCatalog:
    """The same dict, sorted by name once it is filled."""

    def __init__(self, tools: Sequence[FunctionTool | Toolset]) -> None:
        self._by_name: dict[str, FunctionTool] = {}

        def add(tool: FunctionTool | Toolset) -> None:
            if isinstance(tool, Toolset):
                for inner in tool.tools:
                    add(inner)
            else:
                self._by_name[tool.name] = tool

        for tool in tools:
            add(tool)
        self._by_name = dict(sorted(self._by_name.items()))

    def schemas(self) -> list[dict[str, Any]]:
        return [_schema(tool) for tool in self._by_name.values()]


class EmitSortedCatalog:
    """The dict in insertion order, emitted through sorted()."""

    def __init__(self, tools: Sequence[FunctionTool | Toolset]) -> None:
        self._by_name: dict[str, FunctionTool] = {}

        def add(tool: FunctionTool | Toolset) -> None:
            if isinstance(tool, Toolset):
                for inner in tool.tools:
                    add(inner)
            else:
                self._by_name[tool.name] = tool

        for tool in tools:
            add(tool)

    def schemas(self) -> list[dict[str, Any]]:
        return [_schema(self._by_name[name]) for name in sorted(self._by_name)]
