"""Render a model's Jinja chat template exactly as transformers' ``apply_chat_template`` does.

Same environment (``ImmutableSandboxedEnvironment`` with ``trim_blocks``, ``lstrip_blocks`` and
the ``loopcontrols`` extension), the same ``tojson`` filter (no HTML escaping), the same globals
(``raise_exception``, ``strftime_now``, a restricted ``dict`` and ``namespace``), and the same
template variables (``messages``, ``tools``, ``documents``, ``add_generation_prompt`` and the
tokenizer's special tokens such as ``bos_token``/``eos_token``). Messages are normalised the same
way too: ``None`` values are dropped and reasoning fields are aliased.

Reference: transformers ``utils/chat_template_utils.py`` (``_cached_compile_jinja_template``,
``render_jinja_template``), https://huggingface.co/docs/transformers/main/en/chat_templating,
checked 2026-11-30. The ``{% generation %}`` tag (assistant-token masks) renders its body and is
otherwise ignored: the engine never asks for masks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from promptcache.errors import InvalidRequestError, ModelLoadError

__all__ = ["compile_template", "render_chat"]

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class _GenerationTag(jinja2.ext.Extension):
    """Accept ``{% generation %}...{% endgeneration %}`` and render the body unchanged."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's own class attribute

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_render", [], [], None, None)
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render(self, caller: Any) -> str:
        return str(caller())


class _TemplateDict:
    """``dict(...)`` inside templates, without exposing the type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """``namespace(...)`` that refuses underscore-prefixed attribute names, as transformers does."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # jinja2 Namespace signature trick
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates cannot store underscore-prefixed attributes, got {name!r}"
            )


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def compile_template(source: str, origin: str | None = None) -> jinja2.Template:
    """Compile a chat template in transformers' sandboxed environment (cached by source).

    ``origin`` names where the template came from (a file, ``--chat-template``) in the error.

    Raises:
        ModelLoadError: the template does not compile: a Jinja syntax error, or any error Jinja
            raises while compiling (e.g. constant-folding ``{{ 10 ** 5000 }}`` raises ValueError
            at the integer digits limit).
    """
    try:
        return _compile(source)
    except Exception as exc:  # jinja2 lets the errors of constant folding and codegen escape
        where = f"{origin}: " if origin else ""
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ModelLoadError(
            f"{where}the chat template does not compile ({detail}); fix the template"
        ) from exc


@lru_cache(maxsize=16)
def _compile(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationTag, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env.from_string(source)


def _plain(value: Any) -> Any:
    """JSON-shaped copy of caller data (what transformers lets a template see)."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if callable(getattr(value, "model_dump", None)):  # pydantic objects, e.g. openai's types
        return _plain(value.model_dump())
    if isinstance(value, str):  # subclasses (enums...) are stripped back to the base type
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    return f"<{type(value).__name__}>"


def _normalise_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Drop ``None`` values and alias reasoning fields, as transformers does before rendering."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, Mapping):
            raise InvalidRequestError(f"every chat message must be an object, got {message!r}")
        msg = {k: v for k, v in _plain(message).items() if v is not None}
        reasoning = next((msg[k] for k in _REASONING_FIELDS if msg.get(k) is not None), None)
        if reasoning is not None:
            msg = {"thinking": reasoning, **msg, "reasoning_content": reasoning}
        out.append(msg)
    return out


def render_chat(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    tools: Sequence[Mapping[str, Any]] | None = None,
    documents: Sequence[Mapping[str, Any]] | None = None,
    special_tokens: Mapping[str, str] | None = None,
    **template_kwargs: Any,
) -> str:
    """Render ``messages`` with ``template``.

    Args:
        template: Jinja source from the tokenizer config.
        messages: ``[{"role": ..., "content": ...}, ...]`` (content may be a list of parts).
        add_generation_prompt: append the assistant header so the model answers next.
        tools: JSON-schema tool definitions, passed to the template as ``tools``.
        documents: retrieval documents, passed as ``documents``.
        special_tokens: ``bos_token``, ``eos_token``... names -> strings.
        template_kwargs: extra variables (override special tokens of the same name).

    Raises:
        InvalidRequestError: the conversation is empty or the template rejects it (e.g. its
            ``raise_exception("Conversation roles must alternate ...")``).
    """
    if not messages:
        raise InvalidRequestError("messages must hold at least one message")
    variables = {**(special_tokens or {}), **_plain(template_kwargs)}
    try:
        return compile_template(template).render(
            messages=_normalise_messages(messages),
            tools=_plain(tools),
            documents=_plain(documents),
            add_generation_prompt=add_generation_prompt,
            **variables,
        )
    except jinja2.exceptions.TemplateError as exc:
        raise InvalidRequestError(
            f"the model's chat template rejected the messages: {exc}"
        ) from exc
