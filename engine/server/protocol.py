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
implement are rejected unless they carry their no-op value (``unsupported.UNSUPPORTED_FIELDS``).

Validation rules shared by every field:

- Integer fields accept JSON integers and integral numbers such as ``2.0`` or ``1e2`` (JSON has
  one number type; vLLM's pydantic models accept them too). ``2.5`` is ``invalid_type``. Every
  integer field has an upper bound (at most ``MAX_INT`` = 2**31 - 1, ``seed`` 2**63 - 1), so no
  value can overflow a torch integer later; token ids must lie in the vocabulary.
- Text that reaches the tokenizer or the engine (prompts, message fields, ``stop``,
  ``cache_salt``) must be valid Unicode: a JSON escape of a lone UTF-16 surrogate such as
  ``"\\ud800"`` is ``invalid_value``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promptcache.errors import InvalidRequestError, RequestFieldError

from ..sampling_params import MAX_LOGPROBS, MAX_SEED, SamplingParams
from ..tokenizer import Tokenizer
from .unsupported import unsupported_field_error

__all__ = [
    "MAX_INT",
    "MAX_N",
    "ChatRequest",
    "CompletionRequest",
    "ServingContext",
    "parse_chat_request",
    "parse_completion_request",
]

logger = logging.getLogger(__name__)

#: Most samples per prompt one request may ask for (OpenAI's limit for ``n`` is 128).
MAX_N = 128
#: Most prompts in one ``/v1/completions`` batch (``prompt`` given as a list).
MAX_PROMPTS = 256
#: Default ``max_tokens`` of ``/v1/completions`` (the OpenAI default), lowered to the room the
#: prompt leaves under ``max_model_len`` when the client does not send ``max_tokens``.
COMPLETIONS_DEFAULT_MAX_TOKENS = 16
#: Chat message roles the server passes to the chat template.
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
#: Largest value of an integer request field (``max_tokens``, ``top_k``...): int32's maximum,
#: so a value can never overflow the int32/int64 tensors the sampler builds from it.
MAX_INT = 2**31 - 1
#: Deepest nesting of arrays/objects inside one chat message (real messages use 3 or 4 levels).
MAX_MESSAGE_DEPTH = 32


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
    token ids. ``max_tokens`` defaults to 16, or to the room the shortest prompt leaves under
    ``max_model_len`` when that is less (a longer prompt of a batch stops at ``max_model_len``
    with ``finish_reason`` "length"). Only an explicit ``max_tokens`` that does not fit is an
    error.

    Raises:
        RequestFieldError: a missing, mistyped or out-of-range field; an unknown model; an
            unsupported field (``UNSUPPORTED_FIELDS``); a prompt of ``max_model_len`` tokens or
            more, or one that with an explicit ``max_tokens`` overruns it (code
            ``context_length_exceeded``).
    """
    fields = _Fields(body)
    model = _model(fields, ctx)
    unsupported = unsupported_field_error(fields.body, "completions")
    if unsupported is not None:
        raise unsupported
    texts, prompts = _completion_prompts(fields.require("prompt"), ctx)
    echo = fields.boolean("echo", False)
    logprobs = fields.integer("logprobs", None, low=0, high=MAX_LOGPROBS)
    if echo and logprobs is not None:
        raise _unsupported("echo", "echo together with logprobs (prompt logprobs) is not supported")
    best_of = fields.integer("best_of", None, low=1, high=ctx.max_n)
    n = fields.integer("n", 1, low=1, high=ctx.max_n)
    if best_of is not None and best_of != n:
        raise _unsupported("best_of", "best_of different from n is not supported")
    max_tokens = fields.integer("max_tokens", None, low=1, high=MAX_INT)
    for ids in prompts:
        _check_length(len(ids), max_tokens, prompt_param="prompt", param="max_tokens", ctx=ctx)
    if max_tokens is None:
        room = ctx.max_model_len - min(len(ids) for ids in prompts)
        max_tokens = min(COMPLETIONS_DEFAULT_MAX_TOKENS, room)
    stream, include_usage = _stream_flags(fields)
    params = _sampling_params(fields, ctx, n=n, max_tokens=max_tokens, logprobs=logprobs)
    return CompletionRequest(
        model=model,
        prompts=prompts,
        prompt_texts=texts,
        params=params,
        stream=stream,
        include_usage=include_usage,
        echo=echo,
        cache_salt=_cache_salt(fields),
    )


def parse_chat_request(body: object, ctx: ServingContext) -> ChatRequest:
    """Validate a ``/v1/chat/completions`` body, render its messages and tokenise them.

    ``max_completion_tokens`` (or the older ``max_tokens``) defaults to the room left under
    ``max_model_len``. ``logprobs`` is a boolean; ``top_logprobs`` (0-20) needs it.

    Raises:
        RequestFieldError: as ``parse_completion_request``, plus malformed ``messages``, a model
            without a chat template, or a template that rejects the conversation or fails to
            render it (``param`` "messages", the template's error in the message).
    """
    fields = _Fields(body)
    model = _model(fields, ctx)
    unsupported = unsupported_field_error(fields.body, "chat")
    if unsupported is not None:
        raise unsupported
    messages = _messages(fields.require("messages"))
    add_generation_prompt = fields.boolean("add_generation_prompt", True)
    text = _render_chat(ctx.tokenizer, messages, add_generation_prompt)
    prompt = ctx.tokenizer.encode(text, add_special_tokens=False)
    if not prompt:
        raise RequestFieldError(
            "the rendered conversation is empty", param="messages", code="invalid_value"
        )
    # max_completion_tokens replaces the deprecated max_tokens; both are checked when sent.
    legacy = fields.integer("max_tokens", None, low=1, high=MAX_INT)
    newer = fields.integer("max_completion_tokens", None, low=1, high=MAX_INT)
    key = "max_completion_tokens" if newer is not None else "max_tokens"
    max_tokens = newer if newer is not None else legacy
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
        ctx,
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
        cache_salt=_cache_salt(fields),
    )


def _render_chat(
    tokenizer: Tokenizer, messages: list[dict[str, Any]], add_generation_prompt: bool
) -> str:
    """The conversation rendered by the chat template; any template failure is a 400."""
    try:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    except InvalidRequestError as exc:  # no template, or the template's raise_exception(...)
        raise RequestFieldError(str(exc), param="messages", code="invalid_value") from exc
    except MemoryError:
        raise
    except Exception as exc:  # a template bug these messages hit, e.g. str + int
        logger.warning("the chat template failed to render a request's messages: %r", exc)
        raise RequestFieldError(
            f"the model's chat template failed to render these messages: "
            f"{type(exc).__name__}: {exc}. Change the messages, or fix the server's chat "
            "template (--chat-template).",
            param="messages",
            code="invalid_value",
        ) from exc


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

    def integer(self, name: str, default: Any, *, low: int, high: int, hint: str = "") -> Any:
        value = self.body.get(name)
        if value is None:
            return default
        return _integer(value, name, low=low, high=high, hint=hint)

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


def _as_int(value: object) -> int | None:
    """``value`` as an int when it is a JSON integer or an integral number (2.0), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _show_number(value: float) -> str:
    """A number for an error message, never hundreds of digits long."""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "a number too large for JSON doubles"
    digits = str(abs(value))
    return str(value) if len(digits) <= 20 else f"a {len(digits)}-digit number"


def _integer(value: object, param: str, *, low: int, high: int, hint: str = "") -> int:
    """``value`` checked to be an integer (2.0 counts as 2) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong_type(param, "an integer", value)
    if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        raise RequestFieldError(
            f"{param} must be an integer, got {value!r}", param=param, code="invalid_type"
        )
    if not (isinstance(value, int) or math.isfinite(value)) or not low <= value <= high:
        extra = f" ({hint})" if hint else ""
        raise RequestFieldError(
            f"{param} must be an integer between {low} and {high}, got "
            f"{_show_number(value)}{extra}",
            param=param,
            code="invalid_value",
        )
    return int(value)


def _check_text(text: str, param: str) -> str:
    """``text`` unchanged if it is valid Unicode (no lone UTF-16 surrogate), else a 400.

    JSON can spell a lone surrogate (``"\\ud800"``) that no UTF-8 text contains; the tokenizer
    and the prefix-cache hash cannot take it.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestFieldError(
            f"{param} must be valid Unicode text, but character {exc.start} is a lone UTF-16 "
            f"surrogate (\\u{ord(text[exc.start]):04x}); send surrogates only as high-low pairs "
            "(or the character itself, UTF-8 encoded)",
            param=param,
            code="invalid_value",
        ) from None
    return text


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


def _cache_salt(fields: _Fields) -> str | None:
    salt = fields.string("cache_salt", None)
    if salt is None:
        return None
    if not salt:
        raise RequestFieldError(
            "cache_salt must be a non-empty string; leave it out to share the prefix cache with "
            "every request that sends none",
            param="cache_salt",
            code="invalid_value",
        )
    return _check_text(salt, "cache_salt")


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
    ctx: ServingContext,
    *,
    n: int,
    max_tokens: int,
    logprobs: int | None,
    max_tokens_param: str = "max_tokens",
) -> SamplingParams:
    """Read the sampling fields shared by both endpoints and build ``SamplingParams``."""
    stop_token_ids = fields.get("stop_token_ids")
    if stop_token_ids is not None:
        stop_token_ids = _token_ids(stop_token_ids, "stop_token_ids", ctx, allow_empty=True)
    top_k = fields.integer("top_k", 0, low=-1, high=MAX_INT, hint="0 or -1 turns top-k off")
    seed = fields.integer("seed", None, low=0, high=MAX_SEED)
    stop = _stop(fields)
    ignore_eos = fields.boolean("ignore_eos", False)
    values = {
        "temperature": fields.number("temperature", 1.0),
        "top_p": fields.number("top_p", 1.0),
        "min_p": fields.number("min_p", 0.0),
        "repetition_penalty": fields.number("repetition_penalty", 1.0),
        "presence_penalty": fields.number("presence_penalty", 0.0),
        "frequency_penalty": fields.number("frequency_penalty", 0.0),
    }
    try:  # the ranges of the float fields are checked here
        return SamplingParams(
            n=n,
            top_k=top_k,
            seed=seed,
            stop=stop,
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


def _stop(fields: _Fields) -> list[str] | None:
    """``stop`` as a list of non-empty, valid strings (a single string is one stop string)."""
    stop = fields.get("stop")
    if stop is None:
        return None
    items = [stop] if isinstance(stop, str) else stop
    if not isinstance(items, list):
        raise _wrong_type("stop", "a string or an array of strings", stop)
    for i, item in enumerate(items):
        if not isinstance(item, str):  # "got an array" would contradict "an array of strings"
            raise RequestFieldError(
                f"stop[{i}] must be a string, got {_json_type(item)}",
                param="stop",
                code="invalid_type",
            )
    for item in items:
        if not item:
            raise RequestFieldError(
                'stop strings must not be empty ("" would match before any output); leave stop '
                "out, or send [], for no stop strings",
                param="stop",
                code="invalid_value",
            )
        _check_text(item, "stop")
    return items or None


# Prompts ------------------------------------------------------------------------------------------


def _token_ids(
    value: object, param: str, ctx: ServingContext, *, allow_empty: bool = False
) -> list[int]:
    """A JSON array of token ids, each an integer in ``[0, vocab_size)``."""
    if not isinstance(value, list):
        raise _wrong_type(param, "an array of token ids", value)
    ids: list[int] = []
    for i, item in enumerate(value):
        token = _as_int(item)
        if token is None:
            raise RequestFieldError(
                f"{param}[{i}] must be an integer token id, got {_json_type(item)}",
                param=param,
                code="invalid_type",
            )
        if not 0 <= token < ctx.vocab_size:
            raise RequestFieldError(
                f"{param}[{i}] is {_show_number(token)}, outside the vocabulary "
                f"[0, {ctx.vocab_size})",
                param=param,
                code="invalid_value",
            )
        ids.append(token)
    if not ids and not allow_empty:
        raise RequestFieldError(
            f"{param} is empty: send at least one token", param=param, code="invalid_value"
        )
    return ids


def _is_token_list(value: object) -> bool:
    return isinstance(value, list) and all(_as_int(t) is not None for t in value)


def _completion_prompts(prompt: object, ctx: ServingContext) -> tuple[list[str], list[list[int]]]:
    """(prompt texts, prompt token ids) for every form ``prompt`` may take."""
    items: list[str | list[Any]]
    if isinstance(prompt, str):
        items = [prompt]
    elif isinstance(prompt, list) and _is_token_list(prompt):
        items = [list(prompt)]
    elif isinstance(prompt, list) and all(isinstance(p, str) or _is_token_list(p) for p in prompt):
        items = list(prompt)
    elif isinstance(prompt, list):
        raise _bad_prompt_item(prompt, ctx)
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
    batch = isinstance(prompt, list) and not _is_token_list(prompt)
    texts: list[str] = []
    token_lists: list[list[int]] = []
    for i, item in enumerate(items):
        where = f"prompt[{i}]" if batch else "prompt"
        if isinstance(item, str):
            ids = ctx.tokenizer.encode(_check_text(item, where))
            text = item
        else:
            ids = _token_ids(item, where, ctx)
            text = ctx.tokenizer.decode(ids)
        if not ids:
            raise RequestFieldError(
                f"{where} is empty: send at least one token", param=where, code="invalid_value"
            )
        texts.append(text)
        token_lists.append(ids)
    return texts, token_lists


def _bad_prompt_item(prompt: list[object], ctx: ServingContext) -> RequestFieldError:
    """The error naming the first element of a ``prompt`` array that is neither a string nor a
    token-id array (nor, in an array that starts with a number, an integer token id)."""
    if isinstance(prompt[0], (int, float)) and not isinstance(prompt[0], bool):
        try:  # token ids, one of them not an integer: _token_ids names it
            _token_ids(prompt, "prompt", ctx)
        except RequestFieldError as exc:
            return exc
    for i, item in enumerate(prompt):
        if isinstance(item, list):
            try:
                _token_ids(item, f"prompt[{i}]", ctx, allow_empty=True)
            except RequestFieldError as exc:
                return exc
        elif not isinstance(item, str):
            return _wrong_type(f"prompt[{i}]", "a string or an array of token ids", item)
    return _wrong_type(
        "prompt", "a string, an array of strings, or an array of token-id arrays", prompt
    )


def _messages(value: object) -> list[dict[str, Any]]:
    """Check the message list's shape and flatten text-part arrays to strings.

    An assistant message may carry ``"content": null``. OpenAI's chat API requires an
    assistant's content "unless `tool_calls` or `function_call` is specified", and the
    ``openai`` client sends ``null`` back when a tool-call turn is replayed
    (``ChatCompletionAssistantMessageParam`` in openai-python 3.63.0, generated from OpenAI's
    API spec; the same text in the openai-node reference, checked 2026-12-05:
    https://elsoul.github.io/skeet-ai/interfaces/openai.OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam-1.html
    ). The template sees ``""`` there, as in vLLM (``_parse_chat_message_content`` in
    vllm/entrypoints/chat_utils.py turns ``None`` into no text parts, joined to ``""``): the
    renderer drops ``None`` values as transformers does, and a template written
    ``'...' + message['content']`` fails on the missing key. Every other role's content is
    required (``ChatCompletionUserMessageParam.content`` is ``Required``), so ``null`` there
    is a 400 naming ``messages[i].content``.
    """
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
        if role is None:
            raise RequestFieldError(
                f"{where}.role is required: one of {', '.join(CHAT_ROLES)}",
                param=f"{where}.role",
                code="missing_required_parameter",
            )
        if not isinstance(role, str):
            raise _wrong_type(f"{where}.role", f"one of {', '.join(CHAT_ROLES)}", role)
        if role not in CHAT_ROLES:
            shown = repr(role) if len(role) <= 40 else f"a {len(role)}-character string"
            raise RequestFieldError(
                f"{where}.role must be one of {', '.join(CHAT_ROLES)}, got {shown}",
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
        if content is None:  # an assistant turn that only called tools
            content = ""
        _check_message_values(message, where)
        out.append({**message, "content": content})
    return out


def _check_message_values(message: Mapping[str, Any], where: str) -> None:
    """Every string in a message (keys too) is valid Unicode; nesting is at most
    ``MAX_MESSAGE_DEPTH`` deep. The whole message reaches the chat template, which recurses
    into it."""
    queue: list[tuple[object, str, int]] = [(message, where, 0)]
    for value, path, depth in queue:  # breadth first; the list grows while it is read
        if isinstance(value, str):
            _check_text(value, path)
            continue
        if not isinstance(value, (Mapping, list)):
            continue
        if depth >= MAX_MESSAGE_DEPTH:
            raise RequestFieldError(
                f"{where} is nested more than {MAX_MESSAGE_DEPTH} levels deep",
                param=where,
                code="invalid_value",
            )
        if isinstance(value, list):
            queue.extend((v, f"{path}[{j}]", depth + 1) for j, v in enumerate(value))
            continue
        for key, item in value.items():
            _check_text(key, path)
            queue.append((item, f"{path}.{key}", depth + 1))


def _text_parts(parts: Sequence[object], where: str) -> str:
    texts: list[str] = []
    for j, part in enumerate(parts):
        if not isinstance(part, Mapping) or part.get("type") != "text":
            if isinstance(part, Mapping):
                found = f"{part.get('type')!r} parts are not supported by this text-only model"
            else:
                found = f"got {_json_type(part)}"
            raise RequestFieldError(
                f"{where}[{j}] must be a text part ({{'type': 'text', 'text': ...}}); {found}",
                param=f"{where}[{j}]",
                code="invalid_value",
            )
        text = part.get("text")
        if not isinstance(text, str):
            raise _wrong_type(f"{where}[{j}].text", "a string", text)
        texts.append(text)
    return "".join(texts)
