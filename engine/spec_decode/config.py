"""``SpeculativeConfig``: vLLM's ``speculative_config`` for prompt lookup (``method="ngram"``).

The field names and defaulting rules are vLLM's (``vllm/config/speculative.py``,
https://docs.vllm.ai/en/latest/features/speculative_decoding/n_gram/, checked 2026-12-03):

- ``method``: "ngram" (the only method here; drafts come from the sequence's own tokens).
- ``num_speculative_tokens``: the most draft tokens verified per step (required).
- ``prompt_lookup_max`` / ``prompt_lookup_min``: the longest and shortest n-gram matched. With
  neither given both are 5; with one given, the other takes its value.

Every bad value raises `promptcache.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from promptcache.errors import ConfigError

__all__ = [
    "DEFAULT_PROMPT_LOOKUP",
    "MAX_SPECULATIVE_TOKENS",
    "SPECULATIVE_METHODS",
    "SpeculativeConfig",
]

SPECULATIVE_METHODS = ("ngram",)
"""Draft sources this engine has: prompt lookup only (no draft model)."""

DEFAULT_PROMPT_LOOKUP = 5
"""``prompt_lookup_min`` and ``prompt_lookup_max`` when neither is given (vLLM's default)."""

MAX_SPECULATIVE_TOKENS = 64
"""Upper bound on ``num_speculative_tokens`` (a verify pass of more rows than this costs more
than it could save on any model this engine runs)."""


@dataclass(slots=True, frozen=True)
class SpeculativeConfig:
    """Prompt-lookup speculative decoding settings (validated on construction).

    Attributes:
        method: "ngram".
        num_speculative_tokens: draft tokens proposed and verified per step, at most
            (1..`MAX_SPECULATIVE_TOKENS`).
        prompt_lookup_max: longest n-gram (tokens) matched against the sequence's earlier tokens.
        prompt_lookup_min: shortest n-gram tried (1..prompt_lookup_max).

    Raises:
        ConfigError: an unknown method, a non-integer or out-of-range count, or
            ``prompt_lookup_min > prompt_lookup_max``.
    """

    method: str = "ngram"
    num_speculative_tokens: int = 0
    prompt_lookup_max: int = DEFAULT_PROMPT_LOOKUP
    prompt_lookup_min: int = DEFAULT_PROMPT_LOOKUP

    def __post_init__(self) -> None:
        if self.method not in SPECULATIVE_METHODS:
            raise ConfigError(
                f"speculative_config method must be one of {', '.join(SPECULATIVE_METHODS)} "
                f"(prompt lookup; this engine has no draft model), got {_as_json(self.method)}"
            )
        _check_count("num_speculative_tokens", self.num_speculative_tokens, MAX_SPECULATIVE_TOKENS)
        _check_count("prompt_lookup_max", self.prompt_lookup_max)
        _check_count("prompt_lookup_min", self.prompt_lookup_min)
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ConfigError(
                f"speculative_config prompt_lookup_min={self.prompt_lookup_min} must be <= "
                f"prompt_lookup_max={self.prompt_lookup_max}"
            )

    @classmethod
    def parse(cls, value: SpeculativeConfig | Mapping[str, Any] | str) -> SpeculativeConfig:
        """Build from a mapping or a JSON object string, as vLLM's ``speculative_config``.

        Args:
            value: a `SpeculativeConfig` (returned as is), a dict such as
                ``{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}``,
                or the same as JSON text (``--speculative-config``).

        Raises:
            ConfigError: not JSON / not an object, unknown keys, a missing
                ``num_speculative_tokens``, or any invalid value.
        """
        if isinstance(value, SpeculativeConfig):
            return value
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"speculative_config is not valid JSON ({exc.msg} at column {exc.colno}); "
                    'pass e.g. \'{"method": "ngram", "num_speculative_tokens": 4}\''
                ) from None
        if not isinstance(value, Mapping):
            raise ConfigError(
                f'speculative_config must be an object such as {{"method": "ngram", '
                f'"num_speculative_tokens": 4}}, got {_json_type(value)}'
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            raise ConfigError(
                f"unknown speculative_config key(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(known))}"
            )
        if "method" not in value:
            raise ConfigError('speculative_config needs "method": "ngram"')
        if value.get("num_speculative_tokens") is None:
            raise ConfigError(
                "speculative_config needs num_speculative_tokens (the most draft tokens "
                "verified per step, e.g. 4)"
            )
        given_max = value.get("prompt_lookup_max")
        given_min = value.get("prompt_lookup_min")
        # checked as given: one of them alone also sets the other, which must not take the blame
        for name, given in (("prompt_lookup_max", given_max), ("prompt_lookup_min", given_min)):
            if given is not None:
                _check_count(name, given)
        lookup_max: Any = DEFAULT_PROMPT_LOOKUP
        lookup_min: Any = DEFAULT_PROMPT_LOOKUP
        if given_max is not None or given_min is not None:
            lookup_max = given_max if given_max is not None else given_min
            lookup_min = given_min if given_min is not None else given_max
        return cls(
            method=value["method"],
            num_speculative_tokens=value["num_speculative_tokens"],
            prompt_lookup_max=lookup_max,
            prompt_lookup_min=lookup_min,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form ``parse`` reads back."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _check_count(name: str, value: Any, high: int | None = None) -> None:
    """``value`` is an integer from 1 to ``high`` (no bound when None).

    Raises:
        ConfigError: naming ``name`` and the value."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"speculative_config {name} must be an integer, got {_as_json(value)}")
    if value < 1 or (high is not None and value > high):
        bound = f"between 1 and {high}" if high is not None else ">= 1"
        raise ConfigError(f"speculative_config {name} must be {bound}, got {value}")


def _as_json(value: Any) -> str:
    """``value`` as JSON text, as ``--speculative-config`` spells it (``true``, ``null``,
    ``"4"``); ``repr`` for a Python value JSON has no spelling for."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (``null``, ``array``...), else its Python name."""
    names = {type(None): "null", list: "array", str: "string", bool: "boolean"}
    names.update({int: "number", float: "number"})
    return names.get(type(value), type(value).__name__)
