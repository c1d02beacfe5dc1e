"""``PromptBuilder``: prompts in three ordered layers whose cacheable prefix stays byte-identical.

Vendor prompt caches match an exact prefix (Anthropic: tools -> system -> messages,
https://platform.claude.com/docs/en/build-with-claude/prompt-caching ; OpenAI: the whole prompt
from token 0, https://developers.openai.com/api/docs/guides/prompt-caching ; both checked
2026-11-30). So a prompt is built from the most stable content to the least:

1. **frozen**: system role, rules, tool definitions, knowledge documents, few-shot examples.
   Identical for every user and request. Text is normalised (CRLF -> LF, trailing whitespace
   stripped per line) unless ``normalize_frozen=False``; tool schemas are canonicalised.
2. **session**: user profile, task background, summary of earlier conversation. Stable for one
   user or task.
3. **dynamic**: the current question, logs, the time, live data. Always rendered last.

plus an append-only **history** of user/assistant turns between session and dynamic content.
Adding frozen content after session, history or dynamic content raises ``LayerOrderError``: it
would move the prefix every cached request shares.

Renderers (``to_anthropic``, ``to_openai_chat``, ``to_openai_responses``, ``to_gemini``,
``to_bedrock_converse``) return a ``RenderedRequest``: a plain ``dict`` of request parameters
with the ``warnings`` and ``breakpoints`` of the rendering attached as attributes.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from promptcache.breakpoints import (
    AUTO_LOCATIONS,
    WHY,
    BreakpointPlan,
    Layer,
    PlannedBreakpoint,
    Ttl,
    check_ttl,
    plan_breakpoints,
)
from promptcache.builtin_tools import builtin_tool_tokens
from promptcache.canonical import canonical_json, canonical_tool_schema, normalize_text
from promptcache.errors import ConfigError, LayerOrderError
from promptcache.lookback import SlidingWindow
from promptcache.minimums import ModelMinimums
from promptcache.prompt_types import RenderedRequest, ToolSpec, Turn
from promptcache.tokens import count_tokens

if TYPE_CHECKING:
    from promptcache.fingerprint import RequestFingerprint

__all__ = ["PromptBuilder", "RenderedRequest", "ToolSpec", "Turn"]

#: Tool names both Anthropic and OpenAI accept.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # fullmatch: "$" would let "run\n" through
_BUILTIN_TYPE = re.compile(r"[a-z][a-z_]*_\d{8}")  # an Anthropic tool's versioned type


@lru_cache(maxsize=4096)
def _tokens(text: str) -> int:
    return count_tokens(text)


def _tool_tokens(tool: ToolSpec) -> int:
    """A tool's approximate tokens: its Anthropic entry's canonical JSON, plus the definition
    the API adds for a built-in tool (``promptcache.builtin_tools``)."""
    return _tokens(canonical_json(tool.anthropic_entry())) + builtin_tool_tokens(
        tool.anthropic_type
    )


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a str, got {type(value).__name__}")
    if not value.strip():
        raise ConfigError(f"{what} is empty; vendors reject empty text blocks: leave it out")
    return _utf8(value, what)


def _utf8(value: str, what: str) -> str:
    """``value``, or ConfigError when it holds a lone surrogate, which no request can carry."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"{what} holds a lone surrogate ({value[exc.start : exc.end]!r} at character "
            f"{exc.start}), which UTF-8 cannot encode, so no client can send it; fix the "
            "text's decoding"
        ) from None
    return value


def _title(value: object, what: str) -> str | None:
    """``value`` as a heading's or document's title: None, or one line of text."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a str or None, got {type(value).__name__}")
    if not value.strip():
        raise ConfigError(f"{what} is blank ({value!r}); pass title=None for no heading")
    if value.splitlines() != [value]:
        raise ConfigError(
            f"{what} {value!r} has a line break; a title is one line: put the rest in the text"
        )
    return _utf8(value, what)


@dataclass
class _State:
    tools: list[ToolSpec] = field(default_factory=list)
    frozen: list[str] = field(default_factory=list)
    markers: dict[tuple[str, int], Ttl | None] = field(default_factory=dict)
    session: list[str] = field(default_factory=list)
    history: list[Turn] = field(default_factory=list)
    dynamic: list[str] = field(default_factory=list)
    #: name of the first method that started a later layer; frozen additions then raise.
    later_layer: str | None = None


class PromptBuilder:
    """Build a cache-friendly prompt and render it for any vendor API.

    Args:
        model: model id sent to Anthropic, OpenAI and Bedrock; also selects the minimum
            cacheable prefix. Required by every renderer except ``to_gemini`` (the model is in
            Gemini's URL).
        cache_key: a STABLE tenant, user or conversation id, sent as OpenAI ``prompt_cache_key``
            (requests are routed by it; a random key per request destroys cache hits).
        normalize_frozen: normalise frozen text and tool descriptions (default True).
        breakpoints: automatic Anthropic/Bedrock breakpoint locations, any of
            ``("tools", "frozen", "session", "history")`` (default: all four).
        ttl: ``"5m"`` / ``"1h"`` for every breakpoint, or a mapping from location to TTL
            (missing locations get ``"5m"``), e.g. ``{"tools": "1h", "frozen": "1h"}``.
        min_prefix_tokens: minimum cacheable prefix to use instead of the bundled table's.
        minimums: a model-minimum table to use instead of the bundled one.

    Raises:
        ConfigError: a ``model`` that is not a str, ``breakpoints`` that is not a sequence of
            known locations (``None`` included: pass ``()`` for none), bad TTL, a bad
            ``cache_key`` or ``min_prefix_tokens``, or ``minimums`` that is not a ModelMinimums.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        cache_key: str | None = None,
        normalize_frozen: bool = True,
        breakpoints: Sequence[str] = AUTO_LOCATIONS,
        ttl: str | Mapping[str, str] = "5m",
        min_prefix_tokens: int | None = None,
        minimums: ModelMinimums | None = None,
    ) -> None:
        locations = (
            None
            if isinstance(breakpoints, str) or not isinstance(breakpoints, Iterable)
            else tuple(breakpoints)  # once: a generator is used up by the check
        )
        if locations is None or any(loc not in AUTO_LOCATIONS for loc in locations):
            raise ConfigError(
                f"breakpoints must be a sequence of {AUTO_LOCATIONS} (() for no automatic "
                f"breakpoint), got {breakpoints!r}"
            )
        if model is not None and not isinstance(model, str):
            raise ConfigError(f"model must be a model name (str), got {type(model).__name__}")
        if model is not None:
            _utf8(model, "model")
        if isinstance(ttl, str) or not isinstance(ttl, Mapping):
            ttls = {loc: check_ttl(ttl, "PromptBuilder(ttl=...)") for loc in AUTO_LOCATIONS}
        else:
            bad = [loc for loc in ttl if loc not in AUTO_LOCATIONS]
            if bad:
                raise ConfigError(f"ttl has unknown locations {bad}; use {AUTO_LOCATIONS}")
            ttls = {loc: check_ttl(ttl.get(loc, "5m"), f"ttl[{loc!r}]") for loc in AUTO_LOCATIONS}
        if cache_key is not None and (not isinstance(cache_key, str) or not cache_key.strip()):
            raise ConfigError("cache_key must be a non-empty str (a stable tenant or session id)")
        if cache_key is not None:
            _utf8(cache_key, "cache_key")
        if min_prefix_tokens is not None and (
            isinstance(min_prefix_tokens, bool)
            or not isinstance(min_prefix_tokens, int)
            or min_prefix_tokens < 1
        ):
            raise ConfigError(
                f"min_prefix_tokens must be a positive int, got {min_prefix_tokens!r}"
            )
        if minimums is not None and not isinstance(minimums, ModelMinimums):
            raise ConfigError(
                f"minimums must be a ModelMinimums table (default_model_minimums(), "
                f"load_model_minimums(path)), got {type(minimums).__name__}"
            )
        self.model = model
        self.cache_key = cache_key
        self.normalize_frozen = normalize_frozen
        self.auto_breakpoints: tuple[str, ...] = locations
        self.ttls: dict[str, Ttl] = ttls
        self.min_prefix_tokens = min_prefix_tokens
        self.minimums = minimums
        self._s = _State()
        #: per vendor, where the previous render wrote last (promptcache.lookback)
        self._windows: dict[str, SlidingWindow] = {}

    # -- frozen layer ----------------------------------------------------------------------

    def _frozen(self, method: str, text: str) -> str:
        self._check_frozen_open(method)
        return normalize_text(text) if self.normalize_frozen else text

    def _frozen_title(self, value: object, what: str) -> str | None:
        title = _title(value, what)
        return normalize_text(title) if title is not None and self.normalize_frozen else title

    def _check_frozen_open(self, method: str) -> None:
        if self._s.later_layer is not None:
            raise LayerOrderError(
                f"{method}() adds frozen content, but {self._s.later_layer}() already added "
                "later-layer content; add all frozen content (system, rules, tools, knowledge, "
                "examples) first, then session, history and dynamic content, so the cached "
                "prefix never moves"
            )

    def system(self, text: str) -> PromptBuilder:
        """Add the system role text (frozen). Returns ``self`` for chaining."""
        self._s.frozen.append(self._frozen("system", _text(text, "system text")))
        return self

    def rules(self, text: str, *, title: str | None = None) -> PromptBuilder:
        """Add a block of rules (frozen), rendered under ``## title`` when a title is given."""
        body = self._frozen("rules", _text(text, "rules text"))
        title = self._frozen_title(title, "rules title")
        self._s.frozen.append(f"## {title}\n\n{body}" if title else body)
        return self

    def knowledge(self, text: str, *, title: str | None = None) -> PromptBuilder:
        """Add a knowledge document (frozen), wrapped in ``<document title="...">`` tags."""
        body = self._frozen("knowledge", _text(text, "knowledge text"))
        title = self._frozen_title(title, "knowledge title")
        attr = f' title="{html.escape(title, quote=True)}"' if title else ""
        self._s.frozen.append(f"<document{attr}>\n{body}\n</document>")
        return self

    def example(self, user: str, assistant: str) -> PromptBuilder:
        """Add a few-shot example (frozen), rendered as text in the system prompt.

        Examples live in the system prompt rather than as leading messages so that all frozen
        content stays contiguous, before the session layer.
        """
        u = _text(user, "example user text")
        a = _text(assistant, "example assistant text")
        self._s.frozen.append(
            self._frozen("example", f"<example>\nUser: {u}\nAssistant: {a}\n</example>")
        )
        return self

    def tool(self, name: str, description: str, input_schema: Mapping[str, Any]) -> PromptBuilder:
        """Add a tool definition (frozen). The schema is canonicalised (``canonical_tool_schema``).

        Raises:
            ConfigError: bad or duplicate name, empty description, or a schema that is not a
                JSON Schema object (``"type": "object"``).
            CanonicalizationError: the schema holds a value with no JSON form.
        """
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise ConfigError(f"tool name {name!r} must be 1-64 characters of A-Z a-z 0-9 _ -")
        if any(t.name == name for t in self._s.tools):
            raise ConfigError(f"tool {name!r} is already defined; tool names must be unique")
        if not isinstance(input_schema, Mapping) or input_schema.get("type") != "object":
            raise ConfigError(
                f"tool {name!r}: input_schema must be a JSON Schema object with "
                '"type": "object" (vendors reject other top-level types)'
            )
        desc = self._frozen("tool", _text(description, f"tool {name!r} description"))
        schema = canonical_tool_schema(input_schema, normalize=self.normalize_frozen)
        self._s.tools.append(ToolSpec(name, desc, schema))
        return self

    def anthropic_tool(self, tool_type: str, name: str, **params: Any) -> PromptBuilder:
        """Add one of Anthropic's built-in tools (frozen), e.g. ``anthropic_tool(
        "computer_20250124", "computer", display_width_px=1024, display_height_px=768)``.

        The request names the tool in a few bytes and the API adds its full definition to the
        prompt: ``plan_breakpoints`` and ``approx_tokens`` count the tokens Anthropic documents
        for it (``promptcache.builtin_tools``: 735 for the computer tool, 700 for the text
        editor, 245 for bash). Only ``to_anthropic()`` renders such a tool.

        Raises:
            LayerOrderError: called after session/history/dynamic content.
            ConfigError: bad or duplicate name, a ``tool_type`` that is not a versioned type
                (``name_YYYYMMDD``), or a ``type``, ``name`` or ``cache_control`` parameter.
            CanonicalizationError: a parameter has no JSON form.
        """
        self._check_frozen_open("anthropic_tool")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise ConfigError(f"tool name {name!r} must be 1-64 characters of A-Z a-z 0-9 _ -")
        if any(t.name == name for t in self._s.tools):
            raise ConfigError(f"tool {name!r} is already defined; tool names must be unique")
        if not isinstance(tool_type, str) or not _BUILTIN_TYPE.fullmatch(tool_type):
            raise ConfigError(
                f"tool {name!r}: {tool_type!r} is not a versioned Anthropic tool type such as "
                "'computer_20250124', 'text_editor_20250728' or 'bash_20250124'"
            )
        clash = sorted({"type", "name", "cache_control"} & params.keys())
        if clash:
            raise ConfigError(
                f"tool {name!r}: {clash[0]!r} is set by the builder, not as a parameter"
            )
        canonical = json.loads(canonical_json(dict(params)))
        self._s.tools.append(ToolSpec(name, "", {}, tool_type, canonical))
        return self

    def _custom_tools_only(self, renderer: str) -> None:
        """Raise ``ConfigError`` when an Anthropic built-in tool cannot be rendered."""
        builtin = [t.name for t in self._s.tools if t.anthropic_type is not None]
        if builtin:
            raise ConfigError(
                f"{renderer}() cannot render Anthropic's built-in tool {builtin[0]!r}: only "
                "to_anthropic() sends those"
            )

    def cache_breakpoint(self, ttl: str | None = None) -> PromptBuilder:
        """Mark a breakpoint after the frozen item added last (a tool or a system block).

        Use it to split a large frozen layer, e.g. rules that change monthly (``"1h"``) before
        documents that change daily. Counts toward the limit of 4 with the automatic ones.

        Raises:
            LayerOrderError: called after session/history/dynamic content.
            ConfigError: nothing frozen added yet, a bad ``ttl``, or the block is already
                marked with another TTL (``None`` counts as the builder's TTL for it).
        """
        self._check_frozen_open("cache_breakpoint")
        checked = None if ttl is None else check_ttl(ttl, "cache_breakpoint(ttl=...)")
        if self._s.frozen:
            key, block = ("frozen", len(self._s.frozen) - 1), "the frozen block added last"
        elif self._s.tools:
            key = ("tools", len(self._s.tools) - 1)
            block = f"tool {self._s.tools[-1].name!r}"
        else:
            raise ConfigError("cache_breakpoint() needs frozen content before it to mark")
        if key in self._s.markers:
            # a block holds one breakpoint with one TTL: a second, different TTL is a mistake
            # (the later call would silently win); the same TTL again changes nothing
            before = self._s.markers[key]
            old_ttl, new_ttl = before or self.ttls[key[0]], checked or self.ttls[key[0]]
            if old_ttl != new_ttl:

                def call(given: Ttl | None, ttl: Ttl) -> str:
                    if given is None:
                        return f"cache_breakpoint() (the builder's {key[0]} TTL, {ttl!r})"
                    return f"cache_breakpoint(ttl={given!r})"

                raise ConfigError(
                    f"{call(checked, new_ttl)} on {block}, which {call(before, old_ttl)} already "
                    "marked: a block has one breakpoint with one TTL, so keep one call"
                )
            checked = checked or before
        self._s.markers[key] = checked
        return self

    # -- later layers ----------------------------------------------------------------------

    def _later(self, method: str) -> None:
        if self._s.later_layer is None:
            self._s.later_layer = method

    def session(self, text: str, *, title: str | None = None) -> PromptBuilder:
        """Add session content (user profile, task background, conversation summary)."""
        body = _text(text, "session text")
        title = _title(title, "session title")
        self._later("session")
        self._s.session.append(f"## {title}\n\n{body}" if title else body)
        return self

    def dynamic(self, text: str, *, title: str | None = None) -> PromptBuilder:
        """Add per-request content (the question, logs, time); rendered after everything else."""
        body = _text(text, "dynamic text")
        title = _title(title, "dynamic title")
        self._later("dynamic")
        self._s.dynamic.append(f"## {title}\n\n{body}" if title else body)
        return self

    def clear_dynamic(self) -> PromptBuilder:
        """Remove all dynamic content, to reuse the builder for the next request."""
        self._s.dynamic.clear()
        return self

    def add_user(self, text: str) -> PromptBuilder:
        """Append a user message to the history (append-only)."""
        self._later("add_user")
        self._s.history.append(Turn("user", _text(text, "user message")))
        return self

    def add_assistant(self, text: str) -> PromptBuilder:
        """Append an assistant message to the history (append-only)."""
        self._later("add_assistant")
        self._s.history.append(Turn("assistant", _text(text, "assistant message")))
        return self

    # -- read-only views -------------------------------------------------------------------

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """Tool definitions, in order."""
        return tuple(self._s.tools)

    @property
    def frozen_blocks(self) -> tuple[str, ...]:
        """Frozen system text blocks as rendered (one per system/rules/knowledge/example call)."""
        return tuple(self._s.frozen)

    @property
    def session_blocks(self) -> tuple[str, ...]:
        """Session text blocks as rendered."""
        return tuple(self._s.session)

    @property
    def dynamic_blocks(self) -> tuple[str, ...]:
        """Dynamic text blocks as rendered."""
        return tuple(self._s.dynamic)

    @property
    def history(self) -> tuple[Turn, ...]:
        """History messages, oldest first."""
        return tuple(self._s.history)

    def fork(
        self, *, session: bool = True, history: bool = True, dynamic: bool = True
    ) -> PromptBuilder:
        """A copy sharing no mutable state; leave out layers with ``session=False`` etc.

        The copy's frozen layer is open again for additions only if every later layer was left
        out and none remains.
        """
        other = PromptBuilder.__new__(PromptBuilder)
        other.__dict__.update(self.__dict__)
        other._windows = {}  # a fork is another conversation: it starts without a last write
        s = self._s
        other._s = _State(
            tools=list(s.tools),
            frozen=list(s.frozen),
            markers=dict(s.markers),
            session=list(s.session) if session else [],
            history=list(s.history) if history else [],
            dynamic=list(s.dynamic) if dynamic else [],
        )
        o = other._s
        # the error for a frozen addition names a method whose content the copy still holds
        if o.session:
            o.later_layer = "session"
        elif o.history:
            o.later_layer = "add_user" if o.history[0].role == "user" else "add_assistant"
        elif o.dynamic:
            o.later_layer = "dynamic"
        return other

    # -- shared rendering helpers ----------------------------------------------------------

    def approx_tokens(self) -> dict[str, int]:
        """Approximate tokens per layer (tools, frozen, session, history, dynamic), cl100k_base."""
        return {
            "tools": sum(_tool_tokens(t) for t in self._s.tools),
            "frozen": sum(_tokens(b) for b in self._s.frozen),
            "session": sum(_tokens(b) for b in self._s.session),
            "history": sum(_tokens(t.text) for t in self._s.history),
            "dynamic": sum(_tokens(b) for b in self._s.dynamic),
        }

    def plan_breakpoints(self, vendor: Literal["anthropic", "bedrock"]) -> BreakpointPlan:
        """The breakpoints ``to_anthropic``/``to_bedrock_converse`` render, with warnings.

        Raises:
            BreakpointLimitError, BreakpointTTLOrderError: see ``promptcache.breakpoints``.
            ConfigError: no model set.
        """
        if not self.model:
            raise ConfigError(f"to_{vendor}() needs a model: PromptBuilder(model=...)")
        model = self.model
        s, auto = self._s, self.auto_breakpoints
        requested: list[PlannedBreakpoint] = []
        cumulative = 0

        def want(layer: Layer, index: int, key: tuple[str, int], label: str, last: bool) -> None:
            """Request a breakpoint here if a marker or an automatic location asks for one."""
            is_auto = last and label in auto
            if key in s.markers:
                ttl = s.markers[key] or self.ttls[label]
                name = label if is_auto else "marker"
                requested.append(PlannedBreakpoint(name, layer, index, ttl, cumulative, WHY[name]))
            elif is_auto:
                requested.append(
                    PlannedBreakpoint(label, layer, index, self.ttls[label], cumulative, WHY[label])
                )

        for i, tool in enumerate(s.tools):
            cumulative += _tool_tokens(tool)
            want("tools", i, ("tools", i), "tools", i == len(s.tools) - 1)
        for j, block in enumerate(s.frozen):
            cumulative += _tokens(block)
            want("system", j, ("frozen", j), "frozen", j == len(s.frozen) - 1)
        for j, block in enumerate(s.session):
            cumulative += _tokens(block)
            want("system", len(s.frozen) + j, ("session", j), "session", j == len(s.session) - 1)
        for k, turn in enumerate(s.history):
            cumulative += _tokens(turn.text)
            want("messages", k, ("history", k), "history", k == len(s.history) - 1)
        return plan_breakpoints(
            requested,
            model=model,
            vendor=vendor,
            minimums=self.minimums,
            min_prefix_tokens=self.min_prefix_tokens,
        )

    # -- renderers (promptcache.render.*) --------------------------------------------------

    def to_anthropic(self, *, max_tokens: int = 1024) -> RenderedRequest:
        """Keyword arguments for ``anthropic.Anthropic().messages.create`` (render.anthropic)."""
        from promptcache.render.anthropic import render_anthropic

        return render_anthropic(self, max_tokens=max_tokens)

    def to_bedrock_converse(self, *, max_tokens: int = 1024) -> RenderedRequest:
        """Keyword arguments for boto3 ``bedrock-runtime`` ``converse`` (see render.bedrock)."""
        from promptcache.render.bedrock import render_bedrock_converse

        self._custom_tools_only("to_bedrock_converse")

        return render_bedrock_converse(self, max_tokens=max_tokens)

    def to_openai_chat(
        self,
        *,
        include_cache_key: bool = True,
        retention: str | None = None,
        system_role: Literal["system", "developer"] = "system",
        max_completion_tokens: int | None = None,
    ) -> RenderedRequest:
        """Keyword arguments for ``openai.OpenAI().chat.completions.create`` (see render.openai)."""
        from promptcache.render.openai import render_openai_chat

        self._custom_tools_only("to_openai_chat")

        return render_openai_chat(
            self,
            include_cache_key=include_cache_key,
            retention=retention,
            system_role=system_role,
            max_completion_tokens=max_completion_tokens,
        )

    def to_openai_responses(
        self,
        *,
        include_cache_key: bool = True,
        retention: str | None = None,
        max_output_tokens: int | None = None,
    ) -> RenderedRequest:
        """Keyword arguments for ``openai.OpenAI().responses.create`` (see render.openai)."""
        from promptcache.render.openai import render_openai_responses

        self._custom_tools_only("to_openai_responses")

        return render_openai_responses(
            self,
            include_cache_key=include_cache_key,
            retention=retention,
            max_output_tokens=max_output_tokens,
        )

    def to_gemini(self) -> RenderedRequest:
        """The JSON body of a Gemini ``generateContent`` request (see render.gemini)."""
        from promptcache.render.gemini import render_gemini

        self._custom_tools_only("to_gemini")

        return render_gemini(self)

    def fingerprint(self, api: str = "anthropic") -> RequestFingerprint:
        """``fingerprint_request`` of this prompt rendered for ``api`` (with default options).

        ``api`` is one of ``anthropic``, ``openai_chat``, ``openai_responses``, ``gemini``,
        ``bedrock_converse``. OpenAI renderings leave ``prompt_cache_key`` out when no
        ``cache_key`` is set (it is not part of the prefix).

        Raises:
            ConfigError: ``api`` is not one of those, or the rendering's own errors (nothing to
                answer, no model).
            BreakpointLimitError, BreakpointTTLOrderError: as ``to_anthropic`` and
                ``to_bedrock_converse``.
        """
        from promptcache.fingerprint import fingerprint_request

        renderers: dict[str, Any] = {
            "anthropic": self.to_anthropic,
            "openai_chat": lambda: self.to_openai_chat(
                include_cache_key=self.cache_key is not None
            ),
            "openai_responses": lambda: self.to_openai_responses(
                include_cache_key=self.cache_key is not None
            ),
            "gemini": self.to_gemini,
            "bedrock_converse": self.to_bedrock_converse,
        }
        if not isinstance(api, str) or api not in renderers:
            raise ConfigError(f"fingerprint(api={api!r}): use one of {sorted(renderers)}")
        return fingerprint_request(renderers[api](), api)
