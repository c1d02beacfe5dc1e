"""OpenAI request bodies -> validated, tokenised generation requests.

``parse_completion_request`` reads a ``POST /v1/completions`` body and ``parse_chat_request`` a
``POST /v1/chat/completions`` body. Both check every field's type and range, resolve the model
name, tokenise the prompt (chat: render the model's chat template first) and check the prompt
against ``max_model_len``. Every problem raises ``RequestFieldError`` naming the field (OpenAI's
error ``param``) so the server answers 400 with an OpenAI-shaped body, never 500.

Field semantics follow the OpenAI API reference (https://platform.openai.com/docs/api-reference/chat/create
and /completions/create, checked 2026-11-30). vLLM's extra sampling fields are accepted too
(``top_k``, ``min_p``, ``repetition_penalty``, ``ignore_eos``, ``stop_token_ids``, ``cache_salt``;
https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html, checked 2026-11-30); the
official ``openai`` client sends them through ``extra_body``. Unknown fields are ignored, as vLLM
does, so newer clients keep working; fields that would change the output in a way we do not
implement (``logit_bias``, ``tools``, ``suffix``, ``response_format`` other than text) are rejected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promptcache.errors import InvalidRequestError, RequestFieldError

from ..sampling_params import MAX_LOGPROBS, SamplingParams
from ..tokenizer import Tokenizer

__all__ = [
    "MAX_N",
    "ChatRequest",
    "CompletionRequest",
    "ServingContext",
    "parse_chat_request",
    "parse_completion_request",
]

#: Most samples per prompt one request may ask for (OpenAI's limit for ``n`` is 128).
MAX_N = 128
#: Most prompts in one ``/v1/completions`` batch (``prompt`` given as a list).
MAX_PROMPTS = 256
#: Default ``max_tokens`` of ``/v1/completions`` (the OpenAI default).
COMPLETIONS_DEFAULT_MAX_TOKENS = 16
#: Chat message roles the server passes to the chat template.
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")


@dataclass(frozen=True)
class ServingContext:
    """What request parsing needs to know about the loaded model.

    Attributes:
        model_names: names clients may send as ``model`` (the first is reported back).
        tokenizer: the model's tokenizer (and chat template).
        max_model_len: longest sequence, prompt + output, in tokens.
        vocab_size: token ids must lie in ``[0, vocab_size)``.
        max_num_seqs: the engine's batch limit, which also caps ``n``.
    """

    model_names: tuple[str, ...]
    tokenizer: Tokenizer
    max_model_len: int
    vocab_size: int
    max_num_seqs: int = MAX_N

    @property
    def max_n(self) -> int:
        """Most samples one request may ask for (``n`` forks must fit one batch)."""
        return min(MAX_N, self.max_num_seqs)


@dataclass(frozen=True)
class CompletionRequest:
    """A parsed ``/v1/completions`` request.

    Attributes:
        model: the model name as the client sent it (echoed in responses).
        prompts: one list of token ids per prompt (a batch when ``prompt`` was a list).
        prompt_texts: the prompt strings (decoded when sent as token ids), for ``echo``.
        params: sampling parameters shared by every prompt (``params.n`` samples each).
        stream: answer with server-sent events.
        include_usage: streaming only: send a last chunk with ``usage``.
        echo: prefix each choice's text with its prompt.
        cache_salt: tenant key; requests with different salts never share cached blocks.
    """

    model: str
    prompts: list[list[int]]
    prompt_texts: list[str]
    params: SamplingParams
    stream: bool
    include_usage: bool
    echo: bool
    cache_salt: str | None


@dataclass(frozen=True)
class ChatRequest:
    """A parsed ``/v1/chat/completions`` request.

    Attributes:
        model: the model name as the client sent it.
        prompt: the rendered conversation as token ids.
        params: sampling parameters (``params.logprobs`` = ``top_logprobs`` when
            ``logprobs`` is true, else None).
        stream / include_usage / cache_salt: as in ``CompletionRequest``.
    """

    model: str
    prompt: list[int]
    params: SamplingParams
    stream: bool
    include_usage: bool
    cache_salt: str | None


def parse_completion_request(body: object, ctx: ServingContext) -> CompletionRequest:
    """Validate and tokenise a ``/v1/completions`` body.

    ``prompt`` may be a string, a list of strings, a list of token ids, or a list of lists of
    token ids. ``max_tokens`` defaults to 16.

    Raises:
        RequestFieldError: a missing, mistyped or out-of-range field; an unknown model; a
            prompt of ``max_model_len`` tokens or more (code ``context_length_exceeded``).
    """
    fields = _Fields(body)
    model = _model(fields, ctx)
    texts, prompts = _completion_prompts(fields.require("prompt"), ctx)
    if fields.get("suffix") is not None:
        raise _unsupported("suffix", "suffix (insert mode) is not supported")
    echo = fields.boolean("echo", False)
    logprobs = fields.integer("logprobs", None, low=0, high=MAX_LOGPROBS)
    if echo and logprobs is not None:
        raise _unsupported("echo", "echo together with logprobs (prompt logprobs) is not supported")
    best_of = fields.integer("best_of", None, low=1, high=ctx.max_n)
    n = fields.integer("n", 1, low=1, high=ctx.max_n)
    if best_of is not None and best_of != n:
        raise _unsupported("best_of", "best_of different from n is not supported")
    max_tokens = fields.integer("max_tokens", COMPLETIONS_DEFAULT_MAX_TOKENS, low=1)
    for ids in prompts:
        _check_length(len(ids), max_tokens, prompt_param="prompt", param="max_tokens", ctx=ctx)
    stream, include_usage = _stream_flags(fields)
    params = _sampling_params(fields, n=n, max_tokens=max_tokens, logprobs=logprobs)
    return CompletionRequest(
        model=model,
        prompts=prompts,
        prompt_texts=texts,
        params=params,
        stream=stream,
        include_usage=include_usage,
        echo=echo,
        cache_salt=fields.string("cache_salt", None),
    )


def parse_chat_request(body: object, ctx: ServingContext) -> ChatRequest:
    """Validate a ``/v1/chat/completions`` body, render its messages and tokenise them.

    ``max_completion_tokens`` (or the older ``max_tokens``) defaults to the room left under
    ``max_model_len``. ``logprobs`` is a boolean; ``top_logprobs`` (0-20) needs it.

    Raises:
        RequestFieldError: as ``parse_completion_request``, plus malformed ``messages``, a model
            without a chat template, or a template that rejects the conversation.
    """
    fields = _Fields(body)
    model = _model(fields, ctx)
    messages = _messages(fields.require("messages"))
    if fields.get("tools"):
        raise _unsupported("tools", "tool calling is not supported by this server")
    response_format = fields.get("response_format")
    if response_format is not None and (
        not isinstance(response_format, Mapping) or response_format.get("type") != "text"
    ):
        raise _unsupported("response_format", "only response_format {'type': 'text'} is supported")
    add_generation_prompt = fields.boolean("add_generation_prompt", True)
    try:
        text = ctx.tokenizer.apply_chat_template(
            messages, add_generation_prompt=add_generation_prompt
        )
    except InvalidRequestError as exc:
        raise RequestFieldError(str(exc), param="messages", code="invalid_value") from exc
    prompt = ctx.tokenizer.encode(text, add_special_tokens=False)
    if not prompt:
        raise RequestFieldError(
            "the rendered conversation is empty", param="messages", code="invalid_value"
        )
    key = "max_completion_tokens" if fields.get("max_completion_tokens") is not None else None
    key = key or "max_tokens"
    max_tokens = fields.integer(key, None, low=1)
    _check_length(len(prompt), max_tokens, prompt_param="messages", param=key, ctx=ctx)
    want_logprobs = fields.boolean("logprobs", False)
    top = fields.integer("top_logprobs", None, low=0, high=MAX_LOGPROBS)
    if top is not None and not want_logprobs:
        raise RequestFieldError(
            "top_logprobs needs logprobs set to true", param="top_logprobs", code="invalid_value"
        )
    stream, include_usage = _stream_flags(fields)
    params = _sampling_params(
        fields,
        n=fields.integer("n", 1, low=1, high=ctx.max_n),
        max_tokens=max_tokens if max_tokens is not None else ctx.max_model_len - len(prompt),
        logprobs=(top or 0) if want_logprobs else None,
        max_tokens_param=key,
    )
    return ChatRequest(
        model=model,
        prompt=prompt,
        params=params,
        stream=stream,
        include_usage=include_usage,
        cache_salt=fields.string("cache_salt", None),
    )


# Fields -----------------------------------------------------------------------------------------


class _Fields:
    """Typed access to a JSON object's fields; every failure names the field."""

    def __init__(self, body: object) -> None:
        if not isinstance(body, Mapping):
            raise RequestFieldError(
                f"the request body must be a JSON object, got {_json_type(body)}",
                code="invalid_type",
            )
        self.body = body

    def get(self, name: str) -> Any:
        return self.body.get(name)

    def require(self, name: str) -> Any:
        value = self.body.get(name)
        if value is None:
            raise RequestFieldError(
                f"missing required parameter: '{name}'",
                param=name,
                code="missing_required_parameter",
            )
        return value

    def integer(self, name: str, default: Any, *, low: int, high: int | None = None) -> Any:
        value = self.body.get(name)
        if value is None:
            return default
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _wrong_type(name, "an integer", value)
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise RequestFieldError(
                f"{name} must be {bound}, got {value}", param=name, code="invalid_value"
            )
        return value

    def number(self, name: str, default: float) -> float:
        value = self.body.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _wrong_type(name, "a number", value)
        if not math.isfinite(value):
            raise RequestFieldError(
                f"{name} must be a finite number", param=name, code="invalid_value"
            )
        return float(value)

    def boolean(self, name: str, default: bool) -> bool:
        value = self.body.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise _wrong_type(name, "a boolean", value)
        return value

    def string(self, name: str, default: str | None) -> str | None:
        value = self.body.get(name)
        if value is None:
            return default
        if not isinstance(value, str):
            raise _wrong_type(name, "a string", value)
        return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _wrong_type(name: str, expected: str, value: object) -> RequestFieldError:
    return RequestFieldError(
        f"{name} must be {expected}, got {_json_type(value)}", param=name, code="invalid_type"
    )


def _unsupported(name: str, message: str) -> RequestFieldError:
    return RequestFieldError(message, param=name, code="unsupported_parameter")


def _model(fields: _Fields, ctx: ServingContext) -> str:
    model = fields.require("model")
    if not isinstance(model, str):
        raise _wrong_type("model", "a string", model)
    if model not in ctx.model_names:
        raise RequestFieldError(
            f"the model {model!r} does not exist; this server serves "
            f"{', '.join(repr(m) for m in ctx.model_names)}",
            param="model",
            code="model_not_found",
        )
    return model


def _stream_flags(fields: _Fields) -> tuple[bool, bool]:
    stream = fields.boolean("stream", False)
    options = fields.get("stream_options")
    if options is None:
        return stream, False
    if not stream:
        raise RequestFieldError(
            "stream_options is only allowed when stream is true",
            param="stream_options",
            code="invalid_value",
        )
    if not isinstance(options, Mapping):
        raise _wrong_type("stream_options", "an object", options)
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise _wrong_type("stream_options.include_usage", "a boolean", include)
    return stream, include


def _check_length(
    num_prompt: int, max_tokens: int | None, *, prompt_param: str, param: str, ctx: ServingContext
) -> None:
    """Reject prompts that leave no room for output, or with output, overrun max_model_len."""
    limit = ctx.max_model_len
    if num_prompt >= limit:
        raise RequestFieldError(
            f"This model's maximum context length is {limit} tokens. However, your prompt has "
            f"{num_prompt} tokens, which leaves no room for output. Shorten the prompt.",
            param=prompt_param,
            code="context_length_exceeded",
        )
    if max_tokens is not None and num_prompt + max_tokens > limit:
        raise RequestFieldError(
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{num_prompt + max_tokens} tokens ({num_prompt} in the prompt, {max_tokens} for the "
            f"completion). Lower {param} to at most {limit - num_prompt} or shorten the prompt.",
            param=param,
            code="context_length_exceeded",
        )


# Sampling -----------------------------------------------------------------------------------------

#: SamplingParams field -> request field, to name the field in a range error.
_PARAM_NAMES = {
    "n": "n",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repetition_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "seed": "seed",
    "stop": "stop",
    "every": "stop",  # "every stop string must be ..."
    "stop_token_ids": "stop_token_ids",
    "logprobs": "logprobs",
    "max_tokens": "max_tokens",
}


def _sampling_params(
    fields: _Fields,
    *,
    n: int,
    max_tokens: int,
    logprobs: int | None,
    max_tokens_param: str = "max_tokens",
) -> SamplingParams:
    """Read the sampling fields shared by both endpoints and build ``SamplingParams``."""
    if fields.get("logit_bias"):
        raise _unsupported("logit_bias", "logit_bias is not supported")
    stop = fields.get("stop")
    if stop is not None and not isinstance(stop, (str, list)):
        raise _wrong_type("stop", "a string or an array of strings", stop)
    if isinstance(stop, list) and not all(isinstance(s, str) for s in stop):
        raise _wrong_type("stop", "a string or an array of strings", stop)
    stop_token_ids = fields.get("stop_token_ids")
    if stop_token_ids is not None and not (
        isinstance(stop_token_ids, list)
        and all(isinstance(t, int) and not isinstance(t, bool) for t in stop_token_ids)
    ):
        raise _wrong_type("stop_token_ids", "an array of integers", stop_token_ids)
    seed = fields.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _wrong_type("seed", "an integer", seed)
    top_k = fields.get("top_k")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)):
        raise _wrong_type("top_k", "an integer", top_k)
    values = {
        "temperature": fields.number("temperature", 1.0),
        "top_p": fields.number("top_p", 1.0),
        "min_p": fields.number("min_p", 0.0),
        "repetition_penalty": fields.number("repetition_penalty", 1.0),
        "presence_penalty": fields.number("presence_penalty", 0.0),
        "frequency_penalty": fields.number("frequency_penalty", 0.0),
    }
    ignore_eos = fields.boolean("ignore_eos", False)
    try:
        return SamplingParams(
            n=n,
            top_k=0 if top_k is None else top_k,
            seed=seed,
            stop=stop or None,
            stop_token_ids=stop_token_ids,
            max_tokens=max_tokens,
            ignore_eos=ignore_eos,
            logprobs=logprobs,
            **values,
        )
    except InvalidRequestError as exc:
        # SamplingParams messages start with the field name ("top_p must be in ...").
        param = _PARAM_NAMES.get(str(exc).split(" ", 1)[0])
        if param == "max_tokens":
            param = max_tokens_param
        raise RequestFieldError(str(exc), param=param, code="invalid_value") from exc


# Prompts ------------------------------------------------------------------------------------------


def _is_token_list(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in value
    )


def _completion_prompts(prompt: object, ctx: ServingContext) -> tuple[list[str], list[list[int]]]:
    """(prompt texts, prompt token ids) for every form ``prompt`` may take."""
    items: list[str | list[int]]
    if isinstance(prompt, str):
        items = [prompt]
    elif isinstance(prompt, list) and _is_token_list(prompt):
        items = [list(prompt)]
    elif isinstance(prompt, list) and all(isinstance(p, str) or _is_token_list(p) for p in prompt):
        items = list(prompt)
    else:
        raise _wrong_type(
            "prompt", "a string, an array of strings, or an array of token-id arrays", prompt
        )
    if not items:
        raise RequestFieldError("prompt must not be empty", param="prompt", code="invalid_value")
    if len(items) > MAX_PROMPTS:
        raise RequestFieldError(
            f"at most {MAX_PROMPTS} prompts per request, got {len(items)}",
            param="prompt",
            code="invalid_value",
        )
    texts: list[str] = []
    token_lists: list[list[int]] = []
    for item in items:
        if isinstance(item, str):
            ids = ctx.tokenizer.encode(item)
            text = item
        else:
            bad = [t for t in item if not 0 <= t < ctx.vocab_size]
            if bad:
                raise RequestFieldError(
                    f"prompt token id(s) {bad[:5]} are outside the vocabulary "
                    f"[0, {ctx.vocab_size})",
                    param="prompt",
                    code="invalid_value",
                )
            ids, text = list(item), ctx.tokenizer.decode(item)
        if not ids:
            raise RequestFieldError(
                "the prompt is empty: send at least one token", param="prompt", code="invalid_value"
            )
        texts.append(text)
        token_lists.append(ids)
    return texts, token_lists


def _messages(value: object) -> list[dict[str, Any]]:
    """Check the message list's shape and flatten text-part arrays to strings."""
    if not isinstance(value, list):
        raise _wrong_type("messages", "an array of message objects", value)
    if not value:
        raise RequestFieldError(
            "messages must hold at least one message", param="messages", code="invalid_value"
        )
    out: list[dict[str, Any]] = []
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise _wrong_type(where, "an object", message)
        role = message.get("role")
        if role not in CHAT_ROLES:
            raise RequestFieldError(
                f"{where}.role must be one of {', '.join(CHAT_ROLES)}, got {role!r}",
                param=f"{where}.role",
                code="invalid_value",
            )
        content = message.get("content")
        if isinstance(content, list):
            content = _text_parts(content, f"{where}.content")
        elif content is not None and not isinstance(content, str):
            raise _wrong_type(f"{where}.content", "a string or an array of text parts", content)
        if content is None and role != "assistant":
            raise RequestFieldError(
                f"{where}.content is required for role {role!r}",
                param=f"{where}.content",
                code="missing_required_parameter",
            )
        out.append({**message, "content": content})
    return out


def _text_parts(parts: Sequence[object], where: str) -> str:
    texts: list[str] = []
    for j, part in enumerate(parts):
        if not isinstance(part, Mapping) or part.get("type") != "text":
            kind = part.get("type") if isinstance(part, Mapping) else _json_type(part)
            raise RequestFieldError(
                f"{where}[{j}] must be a text part ({{'type': 'text', 'text': ...}}); "
                f"{kind!r} parts are not supported by this text-only model",
                param=f"{where}[{j}]",
                code="invalid_value",
            )
        text = part.get("text")
        if not isinstance(text, str):
            raise _wrong_type(f"{where}[{j}].text", "a string", text)
        texts.append(text)
    return "".join(texts)
