"""What the engine hands back: per-sequence ``RequestOutput`` and an ``EngineStats`` snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .sampler import TokenLogprobs
from .sequence import FinishReason

__all__ = ["EngineStats", "RequestOutput"]


@dataclass
class RequestOutput:
    """The state of one sequence after a step (or at the end of ``LLM.generate``).

    A request with ``n > 1`` yields one output per sample, told apart by ``sample_index``.

    Attributes:
        request_id: the caller's id.
        sample_index: 0..n-1 (the OpenAI choice index).
        prompt_token_ids: the prompt as tokens.
        output_token_ids: every generated token so far (an EOS or stop token id included).
        new_token_ids: the tokens generated since this sequence's previous output.
        text: the generated text so far, decoded incrementally (special tokens skipped). It is
            the continuation of the prompt (may start with a space). While a request with stop
            strings runs, the last ``len(longest stop) - 1`` characters are held back, so the
            text only ever grows; a matched stop string is cut off.
        finished: True once the sequence ended.
        finish_reason: "stop" (EOS, stop token or stop string), "length" (max_tokens or
            max_model_len), "abort", or None while running.
        stop_reason: the stop string or stop/EOS token id that ended it, else None.
        num_prompt_tokens: prompt length in tokens.
        num_cached_tokens: prompt tokens served by the prefix cache at admission (OpenAI
            ``usage.prompt_tokens_details.cached_tokens``).
        logprobs: one ``TokenLogprobs`` per output token when ``SamplingParams.logprobs`` is
            set, else None.
        num_cached_tokens_by_tier: ``num_cached_tokens`` split by where the blocks were found:
            ``{"pool": n, "ram": n, "disk": n}`` (the lower tiers of
            `promptcache.engine.kv_tiers`; all in "pool" without them).
    """

    request_id: str
    sample_index: int
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    new_token_ids: list[int]
    text: str
    finished: bool
    finish_reason: FinishReason | None
    stop_reason: int | str | None
    num_prompt_tokens: int
    num_cached_tokens: int
    logprobs: list[TokenLogprobs] | None = None
    num_cached_tokens_by_tier: Mapping[str, int] = field(
        default_factory=lambda: {"pool": 0, "ram": 0, "disk": 0}
    )


@dataclass(frozen=True)
class EngineStats:
    """A snapshot for metrics (``/metrics``) and tests.

    Attributes:
        num_running / num_waiting / num_swapped: sequences in each scheduler queue.
        kv_usage: fraction (0..1) of device KV blocks in use.
        num_free_blocks / num_total_blocks: device KV blocks.
        kv_cache_bytes: bytes allocated for the device KV pool.
        prefix_cache_queries_tokens: prompt tokens looked up in the prefix cache (cumulative).
        prefix_cache_hits_tokens: of those, tokens found (cumulative).
        num_preemptions: sequences preempted so far (cumulative).
        num_prompt_tokens / num_generated_tokens: tokens admitted and generated (cumulative).
        prefix_cache_hits_tokens_by_tier: ``prefix_cache_hits_tokens`` split by tier,
            ``{"pool": n, "ram": n, "disk": n}`` (cumulative).
        kv_tier_blocks: blocks held by each lower tier now, ``{"ram": n, "disk": n}`` (empty
            without tiers).
        spec_decode_num_drafts: decode steps that verified prompt-lookup drafts (cumulative;
            vLLM's ``spec_decode_num_drafts``).
        spec_decode_num_draft_tokens: draft tokens proposed and verified (cumulative).
        spec_decode_num_accepted_tokens: of those, tokens that became output (cumulative;
            a draft confirmed by the model but cut by a stop condition is not counted).
    """

    num_running: int
    num_waiting: int
    num_swapped: int
    kv_usage: float
    num_free_blocks: int
    num_total_blocks: int
    kv_cache_bytes: int
    prefix_cache_queries_tokens: int
    prefix_cache_hits_tokens: int
    num_preemptions: int
    num_prompt_tokens: int
    num_generated_tokens: int
    prefix_cache_hits_tokens_by_tier: Mapping[str, int] = field(
        default_factory=lambda: {"pool": 0, "ram": 0, "disk": 0}
    )
    kv_tier_blocks: Mapping[str, int] = field(default_factory=dict)
    spec_decode_num_drafts: int = 0
    spec_decode_num_draft_tokens: int = 0
    spec_decode_num_accepted_tokens: int = 0

    @property
    def prefix_cache_hit_rate(self) -> float:
        """Hits / queries in tokens (0 before any query)."""
        q = self.prefix_cache_queries_tokens
        return self.prefix_cache_hits_tokens / q if q else 0.0
