"""Per-request sampling parameters, validated at construction.

Semantics follow vLLM's `SamplingParams` (https://docs.vllm.ai/en/latest/api/vllm/sampling_params.html,
checked 2026-11-30) and the OpenAI Chat Completions fields they mirror. Unlike nano-vllm,
`temperature=0` is allowed and means greedy (argmax), which is what makes token-for-token
comparison with Hugging Face possible.

Every invalid value raises `promptcache.errors.InvalidRequestError` (a ValueError; the engine
server answers HTTP 400) whose message names the field and the accepted range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from promptcache.errors import InvalidRequestError

__all__ = ["MAX_LOGPROBS", "MAX_SEED", "MAX_TOP_K", "SamplingParams"]

MAX_LOGPROBS = 20
"""Most top-N logprobs one request may ask for (OpenAI's `top_logprobs` limit is 20)."""

MAX_SEED = 2**63 - 1
"""Largest per-request seed: an int64, so ``seed + sample_index`` stays a valid torch seed."""

MAX_TOP_K = 2**31 - 1
"""Largest ``top_k`` accepted (an int32; any value >= the vocabulary size already means "keep
every token"). Bounded so that no request can overflow the sampler's int64 tensors."""

_GREEDY_EPS = 1e-5  # temperatures below this are treated as greedy, as vLLM does


@dataclass(slots=True)
class SamplingParams:
    """How to pick each next token, and when to stop.

    Attributes:
        n: number of independent samples for the prompt. Samples share the prompt's KV blocks
            (copy-on-write) and are reported with `Sequence.sample_index` 0..n-1.
        temperature: softmax temperature >= 0; 0 = greedy (argmax, deterministic).
        top_k: keep the k most likely tokens; 0 or -1 = off; at most MAX_TOP_K.
        top_p: keep the smallest set whose probability mass reaches top_p; in (0, 1], 1 = off.
        min_p: drop tokens whose probability is below min_p * p(most likely); in [0, 1], 0 = off.
        repetition_penalty: > 0; 1 = off. Logits of tokens seen in prompt or output are divided
            by it when positive and multiplied when negative (CTRL / transformers semantics).
        presence_penalty: in [-2, 2]; subtracted once from the logit of every token that
            appeared in the output so far (OpenAI semantics).
        frequency_penalty: in [-2, 2]; subtracted once per occurrence in the output so far.
        seed: per-request random seed in [0, MAX_SEED] for reproducible sampling; None = engine
            RNG.
        stop: stop strings; generation ends when the decoded output contains one (the engine
            truncates the text before it). A single string is accepted.
        stop_token_ids: generation ends when one of these token ids is sampled (kept in output).
        max_tokens: most output tokens per sample (>= 1); also capped by max_model_len.
        ignore_eos: keep going past the model's end-of-sequence token.
        logprobs: return the top-N log-probabilities per output token (0..MAX_LOGPROBS);
            None = none. The sampled token's logprob is always included when not None.

    Raises:
        InvalidRequestError: on any invalid value.
    """

    n: int = 1
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: Sequence[str] | str | None = None
    stop_token_ids: Sequence[int] | None = None
    max_tokens: int = 16
    ignore_eos: bool = False
    logprobs: int | None = None
    # Normalised views, filled in __post_init__ (tuples, so the object can be shared safely).
    stop_strings: tuple[str, ...] = field(init=False, default=())
    stop_token_id_set: frozenset[int] = field(init=False, default=frozenset())

    def __post_init__(self) -> None:
        _int_field("n", self.n, minimum=1)
        _int_field("max_tokens", self.max_tokens, minimum=1)
        if self.top_k == -1 and not isinstance(self.top_k, bool):
            self.top_k = 0  # vLLM's spelling of "off"
        _int_field(
            "top_k", self.top_k, minimum=0, maximum=MAX_TOP_K, hint="use 0 or -1 to disable top-k"
        )
        _float_field("temperature", self.temperature, low=0.0, high=None)
        _float_field("top_p", self.top_p, low=0.0, high=1.0, low_open=True)
        _float_field("min_p", self.min_p, low=0.0, high=1.0)
        _float_field(
            "repetition_penalty", self.repetition_penalty, low=0.0, high=None, low_open=True
        )
        _float_field("presence_penalty", self.presence_penalty, low=-2.0, high=2.0)
        _float_field("frequency_penalty", self.frequency_penalty, low=-2.0, high=2.0)
        if self.seed is not None:
            _int_field("seed", self.seed, minimum=0, maximum=MAX_SEED)
        if self.logprobs is not None:
            _int_field("logprobs", self.logprobs, minimum=0)
            if self.logprobs > MAX_LOGPROBS:
                raise InvalidRequestError(
                    f"logprobs must be at most {MAX_LOGPROBS}, got {self.logprobs}"
                )
        if not isinstance(self.ignore_eos, bool):
            raise InvalidRequestError(f"ignore_eos must be true or false, got {self.ignore_eos!r}")
        self.stop_strings = _stop_strings(self.stop)
        self.stop_token_id_set = _stop_token_ids(self.stop_token_ids)

    @property
    def is_greedy(self) -> bool:
        """True when sampling is argmax (temperature 0, or below 1e-5 as vLLM treats it)."""
        return self.temperature < _GREEDY_EPS

    @property
    def has_penalties(self) -> bool:
        """True when any repetition / presence / frequency penalty changes the logits."""
        return (
            self.repetition_penalty != 1.0
            or self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
        )


def _int_field(
    name: str, value: object, *, minimum: int, maximum: int | None = None, hint: str = ""
) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequestError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        extra = f" ({hint})" if hint else ""
        raise InvalidRequestError(f"{name} must be >= {minimum}, got {value}{extra}")
    if maximum is not None and value > maximum:
        raise InvalidRequestError(f"{name} must be <= {maximum}, got {value}")


def _float_field(
    name: str, value: object, *, low: float, high: float | None, low_open: bool = False
) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidRequestError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InvalidRequestError(f"{name} must be a finite number, got {value!r}")
    too_low = value <= low if low_open else value < low
    too_high = high is not None and value > high
    if too_low or too_high:
        left = "(" if low_open else "["
        right = f"{high}]" if high is not None else "inf)"
        raise InvalidRequestError(f"{name} must be in {left}{low}, {right}, got {value}")


def _stop_strings(stop: object) -> tuple[str, ...]:
    if stop is None:
        return ()
    items = [stop] if isinstance(stop, str) else stop
    if not isinstance(items, (list, tuple)):
        raise InvalidRequestError(f"stop must be a string or a list of strings, got {stop!r}")
    for item in items:
        if not isinstance(item, str) or not item:
            raise InvalidRequestError(f"every stop string must be a non-empty string, got {item!r}")
    return tuple(items)


def _stop_token_ids(ids: object) -> frozenset[int]:
    if ids is None:
        return frozenset()
    if not isinstance(ids, (list, tuple, set, frozenset)):
        raise InvalidRequestError(f"stop_token_ids must be a list of integers, got {ids!r}")
    for token_id in ids:
        if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
            raise InvalidRequestError(
                f"stop_token_ids must hold non-negative integers, got {token_id!r}"
            )
    return frozenset(ids)
