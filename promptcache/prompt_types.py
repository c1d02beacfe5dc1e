"""The values a ``PromptBuilder`` takes and returns: ``ToolSpec``, ``Turn`` and ``RenderedRequest``.

They live apart from ``promptcache.prompt`` so that the renderers (``promptcache.render.*``),
which build a ``RenderedRequest``, do not import the builder module that calls them. Import them
from ``promptcache`` or ``promptcache.prompt`` as before; both re-export them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from promptcache.breakpoints import PlannedBreakpoint

__all__ = ["RenderedRequest", "ToolSpec", "Turn"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool definition in vendor-neutral form, or one of Anthropic's built-in tools.

    Attributes:
        name: 1-64 characters of ``[A-Za-z0-9_-]``.
        description: what the tool does (frozen text, normalised by default); empty for a
            built-in tool.
        input_schema: a JSON Schema object (``"type": "object"``), keys sorted at every depth;
            empty for a built-in tool.
        anthropic_type: the versioned type of an Anthropic built-in tool
            (``"computer_20250124"``, ``"bash_20250124"``), whose definition the API supplies;
            None for a tool defined here.
        params: the built-in tool's other fields (``display_width_px``...), keys sorted.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    anthropic_type: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def anthropic_entry(self) -> dict[str, Any]:
        """The tool's entry in an Anthropic Messages request's ``tools`` (no cache marker)."""
        if self.anthropic_type is not None:
            return {"type": self.anthropic_type, "name": self.name, **self.params}
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass(frozen=True)
class Turn:
    """One history message: ``role`` is ``"user"`` or ``"assistant"``; ``text`` is sent as given."""

    role: Literal["user", "assistant"]
    text: str


class RenderedRequest(dict[str, Any]):
    """Request parameters (``client.messages.create(**rendered)``) plus rendering notes.

    Attributes:
        warnings: sentences about anything that will not cache as one might expect (a skipped
            breakpoint, a prompt below the vendor minimum). Empty when all is well.
        breakpoints: the breakpoints actually rendered, in prefix order.
        plan: one line per rendered breakpoint, ``"<where>: <why>"`` (Anthropic and Bedrock).
    """

    def __init__(
        self,
        params: Mapping[str, Any],
        warnings: Sequence[str] = (),
        breakpoints: Sequence[PlannedBreakpoint] = (),
    ) -> None:
        super().__init__(params)
        self.warnings: tuple[str, ...] = tuple(warnings)
        self.breakpoints: tuple[PlannedBreakpoint, ...] = tuple(breakpoints)

    @property
    def plan(self) -> tuple[str, ...]:
        """Which breakpoint goes where and why, e.g. ``"system[0] (frozen): end of ..."``."""
        return tuple(f"{bp.where}: {bp.why}" for bp in self.breakpoints)
