"""Normalise vendor token-usage payloads into one :class:`Usage` with non-overlapping buckets.

Vendors disagree on whether cache tokens sit *beside* or *inside* the input count, on where TTL
splits live, and on how streams report usage. Every vendor field name lives in this module only;
everything downstream (pricing, proxy, reports) reads :class:`Usage`.

Buckets (all counts in tokens, never negative, no token in two buckets)::

    total_input_tokens = uncached_input_tokens + cache_read_tokens
                       + cache_write_5m_tokens + cache_write_1h_tokens + cache_write_unknown_tokens

``output_tokens`` includes ``reasoning_tokens`` (reasoning is billed as output everywhere);
``reasoning_tokens`` is informational.

Vendor rules (all checked 2026-11-30):

- Anthropic Messages, https://platform.claude.com/docs/en/build-with-claude/prompt-caching :
  ``input_tokens`` counts only tokens after the last cache breakpoint, so cache read/creation
  tokens sit *beside* it. Writes are split by TTL in ``cache_creation.ephemeral_5m_input_tokens``
  / ``ephemeral_1h_input_tokens``; when that split is absent the flat
  ``cache_creation_input_tokens`` lands in ``cache_write_unknown_tokens`` with a warning. Stream
  usage (``message_start`` then ``message_delta``) is cumulative: latest non-null per field.
- OpenAI Chat Completions / legacy Completions,
  https://developers.openai.com/api/docs/guides/prompt-caching : ``prompt_tokens`` *includes*
  ``prompt_tokens_details.cached_tokens`` and ``cache_write_tokens`` (GPT-5.6+; OpenAI does not
  report a TTL split, so writes land in ``cache_write_unknown_tokens`` without a warning).
  Reasoning in ``completion_tokens_details.reasoning_tokens``. DeepSeek's
  ``prompt_cache_hit_tokens`` is read when ``cached_tokens`` is absent
  (https://api-docs.deepseek.com/guides/kv_cache). Streams: the last chunk with ``usage``.
- OpenAI Responses: ``input_tokens`` *includes* ``input_tokens_details.cached_tokens``; reasoning
  in ``output_tokens_details.reasoning_tokens``; streams carry usage in ``response.completed``.
- Gemini, https://ai.google.dev/gemini-api/docs/caching : ``promptTokenCount`` *includes*
  ``cachedContentTokenCount``; no write field (creation is billed as input);
  ``thoughtsTokenCount`` is billed as output and is *not* in ``candidatesTokenCount``;
  ``toolUsePromptTokenCount`` is extra input. Streams: the last chunk's ``usageMetadata``.
  camelCase (REST) and snake_case (Python SDK ``model_dump``) keys are both accepted.
- Bedrock Converse, https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html and
  https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_TokenUsage.html :
  ``inputTokens`` *excludes* ``cacheReadInputTokens`` and ``cacheWriteInputTokens``; writes split
  by TTL in ``cacheDetails: [{"inputTokens": n, "ttl": "5m"|"1h"}]``. Streams: the final
  ``metadata`` event.

Inconsistent payloads never raise: a bucket that would go negative is clamped to 0 and the
``warnings`` tuple says what happened; ``raw`` keeps the vendor's usage object untouched. Payloads
that are not usage at all (not an object, a count that is not an integer, the vendor's required
count missing) raise :class:`~promptcache.errors.UsageParseError`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from promptcache.errors import ConfigError, UsageParseError

__all__ = [
    "API_HINT",
    "MAX_TOKEN_COUNT",
    "USAGE_TOKEN_COLUMNS",
    "VENDOR_APIS",
    "Usage",
    "UsageAccumulator",
    "detect_api",
    "parse_usage",
    "stream_accumulator",
]

#: Every ``api`` / ``vendor`` name this module understands.
VENDOR_APIS: Final[tuple[str, ...]] = (
    "anthropic",
    "openai_chat",
    "openai_responses",
    "openai_completions",
    "gemini",
    "bedrock_converse",
)

#: The token counts every vendor's usage is normalised to, in this order: fields of :class:`Usage`,
#: columns of the proxy's ``requests`` table and hourly rollups, and of ``report --format csv``.
#: ``reasoning_tokens`` (part of ``output_tokens``) and ``total_input_tokens`` (their input sum)
#: are left out: each place places them itself.
USAGE_TOKEN_COLUMNS: Final[tuple[str, ...]] = (
    "uncached_input_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "cache_write_unknown_tokens",
    "output_tokens",
)

#: Largest token count accepted in a usage field (2**40, about 1.1e12). No request comes near
#: it (context windows are at most millions of tokens); a bigger number is corrupt data, and
#: summing a few of them would overflow the signed 64-bit integers SQLite and reports add with.
MAX_TOKEN_COUNT: Final[int] = 2**40


def _plain(value: object) -> object:
    """``value``, or the plain dict of an official client's response object (a pydantic model:
    ``anthropic``'s ``Usage`` and ``Message``, ``openai``'s ``CompletionUsage``, stream events),
    as the vendor sent it (``model_dump(mode="json", by_alias=True)``)."""
    if type(value) is dict or isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        dumped = dump(mode="json", by_alias=True)
        if isinstance(dumped, dict):
            return dumped
    return value


def _check_api(api: str) -> None:
    if api not in VENDOR_APIS:
        raise ConfigError(f"unknown api {api!r}: use one of {', '.join(VENDOR_APIS)}")


#: How a caller that named the API picks another, the end of the error for a usage object that
#: lacks its API's required count; the proxy, whose API comes from the route, leaves it out.
API_HINT: Final = " (check the --api / api argument)"


@dataclass(frozen=True)
class Usage:
    """Token usage of one request, split into non-overlapping priced buckets (units: tokens).

    Build it with a ``from_<vendor>`` parser, :func:`parse_usage` or :func:`stream_accumulator`
    rather than by hand. Equality and hashing ignore ``raw`` (a stream and a non-stream response
    with the same counts compare equal).

    Attributes:
        vendor: which wire format the counts came from, one of :data:`VENDOR_APIS`.
        uncached_input_tokens: input tokens billed at the normal input rate.
        cache_read_tokens: input tokens served from the prompt cache.
        cache_write_5m_tokens: input tokens written to the cache with a 5-minute TTL.
        cache_write_1h_tokens: input tokens written to the cache with a 1-hour TTL.
        cache_write_unknown_tokens: cache writes whose TTL the vendor did not report
            (priced at the 5-minute write rate).
        output_tokens: generated tokens, reasoning included.
        reasoning_tokens: the part of ``output_tokens`` spent on hidden reasoning (0 if unknown).
        raw: the vendor's usage object as received (merged, for streams).
        warnings: human-readable notes about inconsistent or incomplete vendor data.

    Raises:
        UsageParseError: a count is negative, not an ``int`` or above :data:`MAX_TOKEN_COUNT`,
            ``reasoning_tokens`` exceeds ``output_tokens``, or ``vendor`` is unknown.
    """

    vendor: str
    uncached_input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_5m_tokens: int = 0
    cache_write_1h_tokens: int = 0
    cache_write_unknown_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.vendor not in VENDOR_APIS:
            raise UsageParseError(
                f"unknown vendor {self.vendor!r}: use one of {', '.join(VENDOR_APIS)}"
            )
        for name in _COUNT_FIELDS:
            value = getattr(self, name)
            if type(value) is int and 0 <= value <= MAX_TOKEN_COUNT:  # the common case
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageParseError(f"Usage.{name} must be an int >= 0, got {value!r}")
            if value > MAX_TOKEN_COUNT:
                raise UsageParseError(
                    f"Usage.{name} is {value} tokens, more than any request can hold (the limit "
                    f"is {MAX_TOKEN_COUNT}); this is not a token count"
                )
        if self.reasoning_tokens > self.output_tokens:
            raise UsageParseError(
                f"Usage.reasoning_tokens ({self.reasoning_tokens}) is the part of output_tokens "
                f"({self.output_tokens}) spent on reasoning, so it cannot exceed it"
            )

    @property
    def cache_write_tokens(self) -> int:
        """All cache-write tokens (5m + 1h + unknown TTL)."""
        return (
            self.cache_write_5m_tokens
            + self.cache_write_1h_tokens
            + self.cache_write_unknown_tokens
        )

    @property
    def total_input_tokens(self) -> int:
        """Every input token the vendor processed: uncached + cache read + all cache writes."""
        return self.uncached_input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def hit_rate(self) -> float:
        """``cache_read_tokens / total_input_tokens`` in [0, 1]; 0.0 when there was no input."""
        total = self.total_input_tokens
        return self.cache_read_tokens / total if total else 0.0

    # -- non-streaming parsers -------------------------------------------------------------

    @classmethod
    def from_api(cls, api: str, usage: Mapping[str, Any]) -> Usage:
        """Parse a bare usage object of ``api`` (one of :data:`VENDOR_APIS`).

        Raises:
            ConfigError: ``api`` is unknown.
            UsageParseError: as the vendor's ``from_*`` parser.
        """
        _check_api(api)
        return _PARSERS[api](usage)

    @classmethod
    def from_anthropic(cls, usage: Mapping[str, Any]) -> Usage:
        """Parse an Anthropic Messages ``usage`` object (cache tokens beside ``input_tokens``).

        Also fits Claude on Bedrock InvokeModel and Vertex, which return the same object.
        ``reasoning_tokens`` is ``output_tokens_details.thinking_tokens``, the part of
        ``output_tokens`` spent on thinking (0 when absent).

        Raises:
            UsageParseError: not an object, ``input_tokens`` missing, or a count not an integer.
        """
        r = _Reader("anthropic", usage)
        uncached = r.count("input_tokens", required=True)
        read = r.count("cache_read_input_tokens")
        flat = r.optional("cache_creation_input_tokens")
        split_5m = r.optional("cache_creation.ephemeral_5m_input_tokens")
        split_1h = r.optional("cache_creation.ephemeral_1h_input_tokens")
        w5, w1h, unknown = _split_writes(r, flat, split_5m, split_1h, "cache_creation_input_tokens")
        return r.build(
            uncached_input_tokens=uncached,
            cache_read_tokens=read,
            cache_write_5m_tokens=w5,
            cache_write_1h_tokens=w1h,
            cache_write_unknown_tokens=unknown,
            output_tokens=r.count("output_tokens"),
            reasoning_tokens=r.count("output_tokens_details.thinking_tokens"),
        )

    @classmethod
    def from_openai_chat(cls, usage: Mapping[str, Any]) -> Usage:
        """Parse an OpenAI Chat Completions ``usage`` object (cache tokens inside the prompt).

        ``uncached = prompt_tokens - cached_tokens - cache_write_tokens``. DeepSeek's
        ``prompt_cache_hit_tokens`` stands in for ``cached_tokens`` when that is absent.

        Raises:
            UsageParseError: not an object, ``prompt_tokens`` missing, or a count not an integer.
        """
        return _parse_openai_style(usage, "openai_chat")

    @classmethod
    def from_openai_completions(cls, usage: Mapping[str, Any]) -> Usage:
        """Parse a legacy OpenAI Completions ``usage`` object (same shape as Chat's).

        Raises:
            UsageParseError: as :meth:`from_openai_chat`.
        """
        return _parse_openai_style(usage, "openai_completions")

    @classmethod
    def from_openai_responses(cls, usage: Mapping[str, Any]) -> Usage:
        """Parse an OpenAI Responses ``usage`` object (``input_tokens`` includes cached tokens).

        Raises:
            UsageParseError: not an object, ``input_tokens`` missing, or a count not an integer.
        """
        r = _Reader("openai_responses", usage)
        total = r.count("input_tokens", required=True)
        read = r.count("input_tokens_details.cached_tokens")
        write = r.count("input_tokens_details.cache_write_tokens", "cache_write_tokens")
        uncached = r.remainder(total, read + write, "input_tokens", "cached + cache_write tokens")
        return r.build(
            uncached_input_tokens=uncached,
            cache_read_tokens=read,
            cache_write_unknown_tokens=write,
            output_tokens=r.count("output_tokens"),
            reasoning_tokens=r.count("output_tokens_details.reasoning_tokens"),
        )

    @classmethod
    def from_gemini(cls, usage_metadata: Mapping[str, Any]) -> Usage:
        """Parse a Gemini ``usageMetadata`` object (``promptTokenCount`` includes cached tokens).

        Gemini omits zero counts from its JSON, so every field is optional, but at least one
        known count must be present. ``output_tokens = candidatesTokenCount +
        thoughtsTokenCount``; ``toolUsePromptTokenCount`` is added to the uncached input.

        Raises:
            UsageParseError: not an object, no known count present, or a count not an integer.
        """
        r = _Reader("gemini", usage_metadata)
        # each count is read once: a second read would repeat its warning (a negative count)
        known = (
            r.optional("promptTokenCount", "prompt_token_count"),
            r.optional("candidatesTokenCount", "candidates_token_count"),
            r.optional("totalTokenCount", "total_token_count"),
            r.optional("cachedContentTokenCount", "cached_content_token_count"),
        )
        if all(value is None for value in known):
            raise UsageParseError(
                "gemini usageMetadata has none of promptTokenCount, candidatesTokenCount, "
                "totalTokenCount, cachedContentTokenCount; pass the response's usageMetadata"
            )
        prompt, candidates, _, read = (value or 0 for value in known)
        tool_use = r.count("toolUsePromptTokenCount", "tool_use_prompt_token_count")
        thoughts = r.count("thoughtsTokenCount", "thoughts_token_count")
        uncached = r.remainder(prompt, read, "promptTokenCount", "cachedContentTokenCount")
        return r.build(
            uncached_input_tokens=uncached + tool_use,
            cache_read_tokens=read,
            output_tokens=candidates + thoughts,
            reasoning_tokens=thoughts,
        )

    @classmethod
    def from_bedrock_converse(cls, usage: Mapping[str, Any]) -> Usage:
        """Parse a Bedrock Converse ``usage`` object (cache tokens beside ``inputTokens``).

        Raises:
            UsageParseError: not an object, ``inputTokens`` missing, a count not an integer, or
                a ``cacheDetails`` entry without an integer ``inputTokens``.
        """
        r = _Reader("bedrock_converse", usage)
        uncached = r.count("inputTokens", required=True)
        read = r.count("cacheReadInputTokens")
        flat = r.optional("cacheWriteInputTokens")
        w5, w1h, unknown = _bedrock_writes(r, flat)
        return r.build(
            uncached_input_tokens=uncached,
            cache_read_tokens=read,
            cache_write_5m_tokens=w5,
            cache_write_1h_tokens=w1h,
            cache_write_unknown_tokens=unknown,
            output_tokens=r.count("outputTokens"),
        )


_COUNT_FIELDS: Final = (*USAGE_TOKEN_COLUMNS, "reasoning_tokens")


class _Reader:
    """Reads counts out of one vendor usage object, collecting warnings as it goes."""

    def __init__(self, vendor: str, payload: object) -> None:
        payload = _plain(payload)
        if type(payload) is not dict and not isinstance(payload, Mapping):
            raise UsageParseError(
                f"{vendor} usage must be a JSON object, got {type(payload).__name__}; "
                "pass the response's usage object or use parse_usage() on the whole body"
            )
        self.vendor = vendor
        self.payload = payload
        self.warnings: list[str] = []

    def optional(self, *paths: str) -> int | None:
        """The first present, non-null count among dotted ``paths``; negatives clamp to 0."""
        for path in paths:
            node: object = self.payload
            for key in path.split("."):
                if type(node) is not dict and not isinstance(node, Mapping):
                    if node is None:
                        break
                    raise UsageParseError(
                        f"{self.vendor} usage: expected an object above {path!r}, "
                        f"got {type(node).__name__}"
                    )
                node = node.get(key)
            else:
                if node is None:
                    continue
                return self._as_count(path, node)
        return None

    def count(self, *paths: str, required: bool = False) -> int:
        """Like :meth:`optional` but 0 when absent, or an error when ``required``."""
        value = self.optional(*paths)
        if value is None:
            if required:
                raise UsageParseError(
                    f"{self.vendor} usage has no {paths[0]!r}: this does not look like "
                    f"{self.vendor}'s usage object{API_HINT}"
                )
            return 0
        return value

    def _as_count(self, path: str, value: object) -> int:
        if type(value) is int and 0 <= value <= MAX_TOKEN_COUNT:  # the common case
            return value
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageParseError(
                f"{self.vendor} usage field {path!r} must be an integer token count, got {value!r}"
            )
        if value < 0:
            self.warnings.append(f"{path} was negative ({value}); counted as 0")
            return 0
        if value > MAX_TOKEN_COUNT:
            raise UsageParseError(
                f"{self.vendor} usage field {path!r} is {value} tokens, more than any request "
                f"can hold (the limit is {MAX_TOKEN_COUNT}); this is not a token count"
            )
        return value

    def remainder(self, total: int, part: int, total_name: str, part_name: str) -> int:
        """``total - part`` clamped at 0, with a warning when the vendor's numbers disagree."""
        if part > total:
            self.warnings.append(
                f"{part_name} ({part}) exceed {total_name} ({total}); uncached input counted as 0"
            )
            return 0
        return total - part

    def build(self, **counts: int) -> Usage:
        output, reasoning = counts.get("output_tokens", 0), counts.get("reasoning_tokens", 0)
        if reasoning > output:  # reasoning is a part of the output, never more than all of it
            self.warnings.append(
                f"reasoning tokens ({reasoning}) exceed the output tokens ({output}) they are "
                f"part of; reasoning counted as {output}"
            )
            counts["reasoning_tokens"] = output
        try:
            raw = _copy_usage(self.payload)
        except RecursionError:
            raise UsageParseError(
                f"{self.vendor} usage object is nested too deeply (or contains a cycle) to keep "
                "as raw; pass the vendor's usage object as received"
            ) from None
        return Usage(
            vendor=self.vendor,
            raw=raw,
            warnings=tuple(self.warnings),
            **counts,
        )


def _copy_usage(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``copy.deepcopy(dict(payload))``, by hand for what ``json.loads`` gives.

    A usage object is a few nested dicts of ints: copying exact ``dict``/``list`` nodes and
    sharing the immutable leaves (``str``, ``int``, ``float``, ``bool``, ``None``) gives an equal,
    independent copy without ``deepcopy``'s memo and dispatch. Any other value (a subclass, a
    tuple, an SDK object), a cycle or very deep nesting sends the whole object through
    ``copy.deepcopy``.

    Raises:
        RecursionError: nested deeper than ``copy.deepcopy`` can copy.
    """
    try:
        return {key: _copy_json_node(value) for key, value in payload.items()}
    except (_NotPlainJson, RecursionError):
        return copy.deepcopy(dict(payload))


class _NotPlainJson(Exception):
    """A value ``_copy_json_node`` leaves to ``copy.deepcopy``."""


def _copy_json_node(value: Any) -> Any:
    kind = type(value)
    if kind in _SHARED_LEAVES:
        return value
    if kind is dict:
        return {key: _copy_json_node(item) for key, item in value.items()}
    if kind is list:
        return [_copy_json_node(item) for item in value]
    raise _NotPlainJson


_SHARED_LEAVES: Final = frozenset({str, int, float, bool, type(None)})


def _split_writes(
    r: _Reader, flat: int | None, split_5m: int | None, split_1h: int | None, flat_name: str
) -> tuple[int, int, int]:
    """Reconcile a flat cache-write total with an optional TTL split -> (5m, 1h, unknown)."""
    if split_5m is None and split_1h is None:
        if flat:
            r.warnings.append(
                f"{flat_name}={flat} has no TTL split; counted as cache_write_unknown_tokens "
                "and priced at the 5-minute write rate"
            )
        return 0, 0, flat or 0
    w5, w1h = split_5m or 0, split_1h or 0
    if flat is None or flat == w5 + w1h:
        return w5, w1h, 0
    if flat > w5 + w1h:
        r.warnings.append(
            f"{flat_name}={flat} exceeds its TTL split ({w5} + {w1h}); "
            f"the remaining {flat - w5 - w1h} counted as cache_write_unknown_tokens"
        )
        return w5, w1h, flat - w5 - w1h
    r.warnings.append(
        f"{flat_name}={flat} is less than its TTL split ({w5} + {w1h}); the split was used"
    )
    return w5, w1h, 0


def _bedrock_writes(r: _Reader, flat: int | None) -> tuple[int, int, int]:
    """Bedrock's cache writes -> (5m, 1h, unknown): ``cacheWriteInputTokens`` reconciled with
    ``cacheDetails``, whose entries split that total by TTL; an entry with a TTL other than 5m
    or 1h is part of the split (its tokens are not also the total's remainder) and counted as
    unknown, once."""
    details = r.payload.get("cacheDetails")
    if details is None:
        details = []
    if not isinstance(details, list):
        raise UsageParseError(
            f"bedrock_converse usage field 'cacheDetails' must be a list, got {details!r}"
        )
    totals = {"5m": 0, "1h": 0}
    odd: list[tuple[int, object, int]] = []
    for i, entry in enumerate(details):
        if not isinstance(entry, Mapping):
            raise UsageParseError(f"bedrock_converse cacheDetails[{i}] must be an object")
        tokens = r._as_count(f"cacheDetails[{i}].inputTokens", entry.get("inputTokens"))
        ttl = entry.get("ttl")
        if ttl in totals:
            totals[str(ttl)] += tokens
        else:
            odd.append((i, ttl, tokens))
    name = "cacheWriteInputTokens"
    if not details:  # absent, or an empty list: "no cache creation occurred"
        return _split_writes(r, flat, None, None, name)
    if not odd:
        return _split_writes(r, flat, totals["5m"], totals["1h"], name)
    w5, w1h, unknown = totals["5m"], totals["1h"], sum(tokens for _, _, tokens in odd)
    for i, ttl, tokens in odd:
        r.warnings.append(
            f"cacheDetails[{i}] has unknown ttl {ttl!r}; its {tokens} tokens counted as "
            "cache_write_unknown_tokens"
        )
    split = f"{w5} + {w1h} + {unknown} of unknown ttl"
    if flat is None or flat == w5 + w1h + unknown:
        return w5, w1h, unknown
    if flat > w5 + w1h + unknown:
        rest = flat - w5 - w1h - unknown
        r.warnings.append(
            f"{name}={flat} exceeds its TTL split ({split}); the remaining {rest} also "
            "counted as cache_write_unknown_tokens"
        )
        return w5, w1h, unknown + rest
    r.warnings.append(f"{name}={flat} is less than its TTL split ({split}); the split was used")
    return w5, w1h, unknown


def _parse_openai_style(usage: Mapping[str, Any], vendor: str) -> Usage:
    if type(usage) is dict:
        plain = _plain_openai_style(usage, vendor)
        if plain is not None:
            return plain
    r = _Reader(vendor, usage)
    total = r.count("prompt_tokens", required=True)
    read = r.optional("prompt_tokens_details.cached_tokens")
    if read is None:
        hit = r.optional("prompt_cache_hit_tokens")  # DeepSeek
        miss = r.optional("prompt_cache_miss_tokens")
        if hit is not None and miss is not None and hit + miss != total:
            r.warnings.append(
                f"prompt_cache_hit_tokens + prompt_cache_miss_tokens ({hit} + {miss}) "
                f"!= prompt_tokens ({total})"
            )
        read = hit or 0
    write = r.count("prompt_tokens_details.cache_write_tokens", "cache_write_tokens")
    uncached = r.remainder(total, read + write, "prompt_tokens", "cached + cache_write tokens")
    return r.build(
        uncached_input_tokens=uncached,
        cache_read_tokens=read,
        cache_write_unknown_tokens=write,
        output_tokens=r.count("completion_tokens"),
        reasoning_tokens=r.count("completion_tokens_details.reasoning_tokens"),
    )


def _plain_openai_style(usage: dict[str, Any], vendor: str) -> Usage | None:
    """``_parse_openai_style``'s answer for the usage an OpenAI-compatible engine reports on
    every request (``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.
    cached_tokens`` and ``completion_tokens_details.reasoning_tokens`` plain ints within
    bounds, no cache-write count, nothing to warn about), read with one ``get`` a field instead
    of the general reader's dotted paths; None for anything else (the general reader then
    decides, and words any error or warning)."""
    total = usage.get("prompt_tokens")
    if type(total) is not int or not 0 <= total <= MAX_TOKEN_COUNT:
        return None
    details = usage.get("prompt_tokens_details")
    if type(details) is not dict or details.get("cache_write_tokens") is not None:
        return None  # no details: DeepSeek's fields may stand in
    read = details.get("cached_tokens")
    if type(read) is not int or not 0 <= read <= total:
        return None
    if usage.get("cache_write_tokens") is not None:
        return None
    output = usage.get("completion_tokens", 0)
    if output is None:
        output = 0
    elif type(output) is not int or not 0 <= output <= MAX_TOKEN_COUNT:
        return None
    reasoning = 0
    output_details = usage.get("completion_tokens_details")
    if output_details is not None:
        if type(output_details) is not dict:
            return None
        reasoning = output_details.get("reasoning_tokens", 0)
        if reasoning is None:
            reasoning = 0
        elif type(reasoning) is not int or not 0 <= reasoning <= output:
            return None
    try:
        raw = _copy_usage(usage)
    except RecursionError:
        return None
    return Usage(
        vendor=vendor,
        uncached_input_tokens=total - read,
        cache_read_tokens=read,
        output_tokens=output,
        reasoning_tokens=reasoning,
        raw=raw,
    )


_PARSERS: Final = {
    "anthropic": Usage.from_anthropic,
    "openai_chat": Usage.from_openai_chat,
    "openai_completions": Usage.from_openai_completions,
    "openai_responses": Usage.from_openai_responses,
    "gemini": Usage.from_gemini,
    "bedrock_converse": Usage.from_bedrock_converse,
}


def _usage_object(api: str, body: Mapping[str, Any]) -> object:
    if api == "gemini":
        found = body.get("usageMetadata")
        return found if found is not None else body.get("usage_metadata")
    return body.get("usage")


def parse_usage(api: str, response_json: Mapping[str, Any]) -> Usage | None:
    """Find and parse the usage object inside a whole non-streaming response body.

    Args:
        api: one of :data:`VENDOR_APIS`.
        response_json: the decoded response body (``usage`` for most vendors,
            ``usageMetadata`` for Gemini).

    Returns:
        The :class:`Usage`, or ``None`` when the body carries no usage (an error body, or a
        Chat Completions response from a server that does not report usage).

    Raises:
        ConfigError: ``api`` is not one of :data:`VENDOR_APIS`.
        UsageParseError: the body is not an object, or its usage object is malformed.
    """
    _check_api(api)
    response_json = _plain(response_json)  # type: ignore[assignment]
    if not isinstance(response_json, Mapping):
        raise UsageParseError(
            f"{api} response body must be a JSON object, got {type(response_json).__name__}"
        )
    found = _usage_object(api, response_json)
    if found is None:
        return None
    if not isinstance(found, Mapping):
        raise UsageParseError(f"{api} response usage must be a JSON object, got {found!r}")
    return _PARSERS[api](found)


# -- API auto-detection ---------------------------------------------------------------------

_BODY_MARKERS: Final = {
    "message": "anthropic",  # Anthropic: "type": "message"
    "chat.completion": "openai_chat",  # OpenAI: "object": ...
    "chat.completion.chunk": "openai_chat",
    "text_completion": "openai_completions",
    "response": "openai_responses",
}


def detect_api(payload: Mapping[str, Any]) -> str:
    """Guess which vendor API produced ``payload`` (a whole response body or a bare usage object).

    Whole bodies are recognised by ``type: "message"`` (Anthropic), ``object`` (OpenAI Chat,
    Completions, Responses), ``usageMetadata`` (Gemini) or ``output.message`` / ``metrics``
    (Bedrock Converse). Bare usage objects are recognised by their field names. A bare
    ``{"input_tokens", "output_tokens"}`` object is ambiguous between Anthropic (cache tokens
    beside the input) and OpenAI Responses (cache tokens inside), and is refused. Chat and
    legacy Completions usage objects have one shape; a bare one is reported as ``openai_chat``
    (both parse to the same buckets).

    Raises:
        UsageParseError: the payload matches no vendor, or more than one with different
            meanings; the message says to pass ``api`` explicitly.
    """
    payload = _plain(payload)  # type: ignore[assignment]
    if not isinstance(payload, Mapping):
        raise UsageParseError(f"expected a JSON object, got {type(payload).__name__}")
    for key in ("type", "object"):
        marker = payload.get(key)
        if isinstance(marker, str) and marker in _BODY_MARKERS and "usage" in payload:
            return _BODY_MARKERS[marker]
    if "usageMetadata" in payload or "usage_metadata" in payload:
        return "gemini"
    usage = payload.get("usage")
    if (
        isinstance(usage, Mapping)
        and ("metrics" in payload or "output" in payload)
        and "inputTokens" in usage
    ):
        return "bedrock_converse"
    if isinstance(usage, Mapping):
        return _detect_bare(usage)
    return _detect_bare(payload)


def _detect_bare(usage: Mapping[str, Any]) -> str:
    keys = set(usage)
    if keys & {"promptTokenCount", "prompt_token_count", "cachedContentTokenCount"}:
        return "gemini"
    if "inputTokens" in keys:
        return "bedrock_converse"
    if "prompt_tokens" in keys:
        return "openai_chat"
    if "input_tokens" in keys:
        anthropic = keys & {
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "cache_creation",
            "server_tool_use",
            "service_tier",
        }
        responses = keys & {"input_tokens_details", "output_tokens_details", "total_tokens"}
        details = usage.get("output_tokens_details")
        if isinstance(details, Mapping) and "thinking_tokens" in details:
            # Anthropic's output_tokens_details holds thinking_tokens (Responses' holds
            # reasoning_tokens): it names Anthropic, not Responses
            responses.discard("output_tokens_details")
            anthropic.add("output_tokens_details")
        if anthropic and not responses:
            return "anthropic"
        if responses and not anthropic:
            return "openai_responses"
        raise UsageParseError(
            "usage object is ambiguous: 'input_tokens' is used by both Anthropic (cache tokens "
            "counted beside it) and OpenAI Responses (cache tokens inside it); pass the api "
            "explicitly (--api anthropic or --api openai_responses)"
        )
    raise UsageParseError(
        "cannot tell which vendor this usage comes from (no prompt_tokens, input_tokens, "
        "inputTokens or promptTokenCount); pass the api explicitly (--api or api=...), one of "
        + ", ".join(VENDOR_APIS)
    )


# -- streaming ------------------------------------------------------------------------------


class UsageAccumulator(Protocol):
    """Collects usage from a vendor's stream events; one instance per response stream."""

    def feed(self, event: Mapping[str, Any]) -> None:
        """Take one parsed SSE ``data:`` JSON object (or Bedrock stream event); others' usage
        is ignored. Raises UsageParseError if ``event`` is not an object."""

    def result(self) -> Usage | None:
        """The usage seen so far, or ``None`` if no event carried usage."""


def _merge_latest(into: dict[str, Any], update: Mapping[str, Any]) -> None:
    """Per field, keep the latest non-null value; nested objects merge the same way."""
    for key, value in update.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge_latest(into[key], value)
        else:
            into[key] = _copy_usage(value) if isinstance(value, Mapping) else value


def _require_event(api: str, event: object) -> Mapping[str, Any]:
    event = _plain(event)
    if type(event) is not dict and not isinstance(event, Mapping):
        raise UsageParseError(
            f"{api} stream event must be a JSON object (the parsed SSE data), "
            f"got {type(event).__name__}"
        )
    return event


class _AnthropicAccumulator:
    """``message_start.message.usage`` then cumulative ``message_delta.usage``; never summed."""

    def __init__(self) -> None:
        self._merged: dict[str, Any] | None = None

    def feed(self, event: Mapping[str, Any]) -> None:
        event = _require_event("anthropic", event)
        kind = event.get("type")
        usage: object = None
        if kind == "message_start":
            message = event.get("message")
            usage = message.get("usage") if isinstance(message, Mapping) else None
        elif kind == "message_delta":
            usage = event.get("usage")
        if usage is None:
            return
        if not isinstance(usage, Mapping):
            raise UsageParseError(f"anthropic {kind} usage must be an object, got {usage!r}")
        if self._merged is None:
            self._merged = {}
        _merge_latest(self._merged, usage)

    def result(self) -> Usage | None:
        return None if self._merged is None else Usage.from_anthropic(self._merged)


class _LatestObjectAccumulator:
    """Keeps the last non-null usage object found in the stream (OpenAI, Gemini, Bedrock)."""

    def __init__(self, api: str) -> None:
        self._api = api
        self._latest: Mapping[str, Any] | None = None

    def _extract(self, event: Mapping[str, Any]) -> object:
        if self._api in ("openai_chat", "openai_completions"):
            return event.get("usage")
        if self._api == "openai_responses":
            response = event.get("response")  # response.completed / .incomplete / .failed
            return response.get("usage") if isinstance(response, Mapping) else None
        if self._api == "gemini":
            return _usage_object("gemini", event)
        # Bedrock ConverseStream: {"metadata": {"usage": ...}} as boto3 yields it, or the bare
        # metadata payload {"usage": ..., "metrics": ...} as decoded from the event stream.
        metadata = event.get("metadata")
        if isinstance(metadata, Mapping):
            return metadata.get("usage")
        return event.get("usage") if "metrics" in event else None

    def feed(self, event: Mapping[str, Any]) -> None:
        event = _require_event(self._api, event)
        found = self._extract(event)
        if found is None:
            return
        if not isinstance(found, Mapping):
            raise UsageParseError(f"{self._api} stream usage must be an object, got {found!r}")
        self._latest = found

    def result(self) -> Usage | None:
        return None if self._latest is None else _PARSERS[self._api](self._latest)


def stream_accumulator(api: str) -> UsageAccumulator:
    """A fresh accumulator for one streamed response of ``api``.

    Feed it every parsed SSE ``data:`` JSON object in order (skip ``[DONE]``); call
    ``result()`` at the end. Anthropic usage is merged field by field (latest non-null wins,
    never summed); the other vendors report a complete usage object, so the last one wins.
    The result equals the non-streaming parse of the same counts.

    Raises:
        ConfigError: ``api`` is not one of :data:`VENDOR_APIS`.
    """
    _check_api(api)
    if api == "anthropic":
        return _AnthropicAccumulator()
    return _LatestObjectAccumulator(api)
