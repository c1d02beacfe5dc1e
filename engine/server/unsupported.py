"""Request fields the engine server does not implement and will not silently ignore.

Each entry names the field, the endpoints that check it, its no-op value(s) (accepted and
ignored: ``tools: []``, ``min_tokens: 0``...) and what a client can do instead. Any other value
is a 400 ``unsupported_parameter`` naming the field. OpenAI fields from
https://platform.openai.com/docs/api-reference/chat/create; vLLM's extras from
https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html (both checked 2026-11-30).
docs/engine-server.md lists the same table (a test keeps the two in step).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from promptcache.errors import RequestFieldError

__all__ = ["UNSUPPORTED_FIELDS", "UnsupportedField", "unsupported_field_error"]

_BOTH = ("chat", "completions")


@dataclass(frozen=True)
class UnsupportedField:
    """A request field the server does not implement and will not silently ignore.

    Attributes:
        name: the JSON field.
        endpoints: where it is checked: ``"chat"`` and/or ``"completions"``.
        feature: what the field asks for; starts the error message.
        allowed: the accepted no-op value(s), as the docs spell them.
        instead: what the client can do instead; ends the error message.
        is_noop: True for a value that changes nothing (it is accepted and ignored).
    """

    name: str
    endpoints: tuple[str, ...]
    feature: str
    allowed: str
    instead: str
    is_noop: Callable[[Any], bool]


def _absent(value: Any) -> bool:
    return value is None


def _absent_or_false(value: Any) -> bool:
    return value is None or value is False


def _absent_or_true(value: Any) -> bool:
    return value is None or value is True


def _absent_or_empty_list(value: Any) -> bool:
    return value is None or (isinstance(value, list) and not value)


def _absent_or_empty_object(value: Any) -> bool:
    return value is None or (isinstance(value, Mapping) and not value)


def _absent_or_zero(value: Any) -> bool:
    return value is None or (type(value) in (int, float) and value == 0)


def _no_tool_choice(value: Any) -> bool:
    return value is None or value in ("none", "auto")


def _text_format(value: Any) -> bool:
    return value is None or (isinstance(value, Mapping) and value.get("type") == "text")


def _text_modality(value: Any) -> bool:
    return value is None or value == ["text"]


_NO_TOOLS = "describe the tools in the messages and parse the reply yourself"
_NO_GUIDED = "leave it out, ask for the format in the prompt and validate the reply yourself"
#: vLLM's structured-output fields (https://docs.vllm.ai/en/latest/features/structured_outputs.html,
#: checked 2026-11-30).
_GUIDED_FIELDS = (
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "guided_decoding_backend",
    "guided_whitespace_pattern",
    "structural_tag",
    "structured_outputs",
)

#: Fields that would change the output in a way this server does not implement: a request that
#: sends one with a value other than its no-op value gets a 400 (``unsupported_parameter``)
#: naming the field. docs/engine-server.md lists the same table.
UNSUPPORTED_FIELDS: tuple[UnsupportedField, ...] = (
    UnsupportedField(
        name="tools",
        endpoints=("chat",),
        feature="tool calling",
        allowed="null or []",
        instead=_NO_TOOLS,
        is_noop=_absent_or_empty_list,
    ),
    UnsupportedField(
        name="tool_choice",
        endpoints=("chat",),
        feature="tool calling",
        allowed='"none" or "auto"',
        instead="leave it out: this server never calls tools",
        is_noop=_no_tool_choice,
    ),
    UnsupportedField(
        name="functions",
        endpoints=("chat",),
        feature="function calling",
        allowed="null or []",
        instead=_NO_TOOLS,
        is_noop=_absent_or_empty_list,
    ),
    UnsupportedField(
        name="function_call",
        endpoints=("chat",),
        feature="function calling",
        allowed='"none" or "auto"',
        instead="leave it out: this server never calls functions",
        is_noop=_no_tool_choice,
    ),
    UnsupportedField(
        name="response_format",
        endpoints=_BOTH,
        feature="structured output",
        allowed='{"type": "text"}',
        instead=_NO_GUIDED,
        is_noop=_text_format,
    ),
    *(
        UnsupportedField(
            name=name,
            endpoints=_BOTH,
            feature="guided decoding (structured output)",
            allowed="null",
            instead=_NO_GUIDED,
            is_noop=_absent,
        )
        for name in _GUIDED_FIELDS
    ),
    UnsupportedField(
        name="modalities",
        endpoints=("chat",),
        feature="output other than text",
        allowed='["text"]',
        instead='send ["text"] or leave it out',
        is_noop=_text_modality,
    ),
    UnsupportedField(
        name="audio",
        endpoints=("chat",),
        feature="audio output",
        allowed="null",
        instead="leave it out",
        is_noop=_absent,
    ),
    UnsupportedField(
        name="logit_bias",
        endpoints=_BOTH,
        feature="biasing the logits of chosen tokens",
        allowed="null or {}",
        instead="leave it out; stop_token_ids can end generation at chosen tokens",
        is_noop=_absent_or_empty_object,
    ),
    UnsupportedField(
        name="suffix",
        endpoints=("completions",),
        feature="insert mode (suffix)",
        allowed="null",
        instead="leave it out and put all the text in the prompt",
        is_noop=_absent,
    ),
    UnsupportedField(
        name="min_tokens",
        endpoints=_BOTH,
        feature="a minimum output length",
        allowed="0",
        instead="leave it out; ignore_eos: true generates past the end-of-sequence token",
        is_noop=_absent_or_zero,
    ),
    UnsupportedField(
        name="prompt_logprobs",
        endpoints=_BOTH,
        feature="prompt logprobs",
        allowed="null",
        instead="leave it out; logprobs returns the output tokens' logprobs",
        is_noop=_absent,
    ),
    UnsupportedField(
        name="include_stop_str_in_output",
        endpoints=_BOTH,
        feature="keeping the stop string in the output",
        allowed="false",
        instead='leave it out, and append the stop string yourself when finish_reason is "stop"',
        is_noop=_absent_or_false,
    ),
    UnsupportedField(
        name="use_beam_search",
        endpoints=_BOTH,
        feature="beam search",
        allowed="false",
        instead="leave it out; n samples several completions",
        is_noop=_absent_or_false,
    ),
    UnsupportedField(
        name="allowed_token_ids",
        endpoints=_BOTH,
        feature="restricting the output tokens",
        allowed="null",
        instead="leave it out",
        is_noop=_absent,
    ),
    UnsupportedField(
        name="bad_words",
        endpoints=_BOTH,
        feature="banning words",
        allowed="null or []",
        instead="leave it out",
        is_noop=_absent_or_empty_list,
    ),
    UnsupportedField(
        name="truncate_prompt_tokens",
        endpoints=_BOTH,
        feature="prompt truncation",
        allowed="null",
        instead="shorten the prompt yourself",
        is_noop=_absent,
    ),
    UnsupportedField(
        name="echo",
        endpoints=("chat",),
        feature="echoing the last message",
        allowed="false",
        instead="leave it out (/v1/completions supports echo)",
        is_noop=_absent_or_false,
    ),
    UnsupportedField(
        name="continue_final_message",
        endpoints=("chat",),
        feature="continuing the final message",
        allowed="false",
        instead="leave it out, or send the rendered text to /v1/completions",
        is_noop=_absent_or_false,
    ),
    UnsupportedField(
        name="chat_template",
        endpoints=("chat",),
        feature="a per-request chat template",
        allowed="null",
        instead="leave it out and start the server with --chat-template",
        is_noop=_absent,
    ),
    UnsupportedField(
        name="chat_template_kwargs",
        endpoints=("chat",),
        feature="chat template arguments",
        allowed="null or {}",
        instead="leave it out",
        is_noop=_absent_or_empty_object,
    ),
    UnsupportedField(
        name="documents",
        endpoints=("chat",),
        feature="retrieval documents",
        allowed="null or []",
        instead="put the documents in the messages",
        is_noop=_absent_or_empty_list,
    ),
    UnsupportedField(
        name="web_search_options",
        endpoints=("chat",),
        feature="web search",
        allowed="null",
        instead="leave it out",
        is_noop=_absent,
    ),
    UnsupportedField(
        name="skip_special_tokens",
        endpoints=_BOTH,
        feature="special tokens in the output text",
        allowed="true",
        instead="leave it out; logprobs shows every token, special ones included",
        is_noop=_absent_or_true,
    ),
    UnsupportedField(
        name="spaces_between_special_tokens",
        endpoints=_BOTH,
        feature="changing the spacing of special tokens in the text",
        allowed="true",
        instead="leave it out",
        is_noop=_absent_or_true,
    ),
    # vLLM's defaults, which this server always applies: chat templates add the special tokens
    # themselves, a completions prompt gets the tokenizer's (BOS).
    UnsupportedField(
        name="add_special_tokens",
        endpoints=("chat",),
        feature="adding the tokenizer's special tokens to a rendered chat",
        allowed="false",
        instead="leave it out, or send the text with the tokens you want to /v1/completions",
        is_noop=_absent_or_false,
    ),
    UnsupportedField(
        name="add_special_tokens",
        endpoints=("completions",),
        feature="a prompt without the tokenizer's special tokens",
        allowed="true",
        instead="leave it out, or send the prompt as token ids",
        is_noop=_absent_or_true,
    ),
    UnsupportedField(
        name="return_tokens_as_token_ids",
        endpoints=_BOTH,
        feature="logprob tokens as token ids",
        allowed="false",
        instead="leave it out",
        is_noop=_absent_or_false,
    ),
    UnsupportedField(
        name="logits_processors",
        endpoints=_BOTH,
        feature="custom logits processors",
        allowed="null or []",
        instead="leave it out",
        is_noop=_absent_or_empty_list,
    ),
)


#: Every ``UNSUPPORTED_FIELDS`` name: a body that sends none of them is accepted at once (every
#: entry's ``is_noop`` accepts an absent field; a test checks it).
_NAMES = frozenset(entry.name for entry in UNSUPPORTED_FIELDS)


def unsupported_field_error(body: Mapping[str, Any], endpoint: str) -> RequestFieldError | None:
    """The 400 for the first ``UNSUPPORTED_FIELDS`` entry of ``endpoint`` ("chat" or
    "completions") that ``body`` sends with a value other than its no-op value, else None."""
    if _NAMES.isdisjoint(body):
        return None
    for entry in UNSUPPORTED_FIELDS:
        if endpoint in entry.endpoints and not entry.is_noop(body.get(entry.name)):
            return RequestFieldError(
                f"{entry.name}: {entry.feature} is not supported by this server "
                f"(accepted only as {entry.allowed}); {entry.instead}.",
                param=entry.name,
                code="unsupported_parameter",
            )
    return None
