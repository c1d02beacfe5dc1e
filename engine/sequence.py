"""One sequence: a prompt plus the tokens generated for it so far, and its KV-cache state.

Pure Python (no torch), so the block manager and scheduler can be tested on any machine.

Token counters, all in tokens, always `0 <= num_cached_tokens <= num_computed_tokens <= num_tokens`
while the sequence runs:

- `num_tokens`: prompt + output tokens known so far (`len(token_ids)`).
- `num_computed_tokens`: tokens whose K/V are in the KV pool, whether computed by the model or
  taken from the prefix cache. A batch entry's `ScheduledSeq.num_computed_tokens` (and the
  attention metadata's) is this value *before* the step; the scheduler advances it in
  `Scheduler.postprocess`.
- `num_cached_tokens`: prompt tokens served by the prefix cache when the sequence was first
  scheduled; reported to users as cached prompt tokens (`cached_tokens` in OpenAI usage). It does
  not change after preemption.

Ownership: the scheduler mutates status and counters, the block manager mutates `block_table`
and `block_hashes`; the engine only reads.
"""

from __future__ import annotations

import enum
import itertools
from typing import Literal

from .sampling_params import SamplingParams

__all__ = ["FinishReason", "Sequence", "SequenceStatus"]

FinishReason = Literal["stop", "length", "abort"]
"""Why a sequence ended: a stop token/string/EOS, max_tokens or max_model_len, or an abort."""

_seq_ids = itertools.count()


class SequenceStatus(enum.Enum):
    """Where a sequence is in the scheduler's queues."""

    WAITING = "waiting"  # queued, holds no blocks (new, or preempted by recompute)
    RUNNING = "running"  # holds KV blocks in the device pool
    SWAPPED = "swapped"  # preempted by swap: its blocks live in the CPU pool
    FINISHED = "finished"  # done; blocks released; `finish_reason` says why


class Sequence:
    """A prompt and its generated tokens, with the KV-cache bookkeeping the scheduler needs.

    Args:
        request_id: the caller's id; `n > 1` samples of one request share it.
        prompt_token_ids: the tokenised prompt, at least one token.
        params: sampling parameters (shared, never mutated).
        cache_salt: optional tenant key mixed into the hash of block 0, so tenants with
            different salts never share prefix-cache blocks.
        sample_index: which of the request's `n` samples this is (0 for the first).

    Attributes:
        seq_id: unique id in this process (monotonic; also the arrival order tiebreak).
        token_ids: prompt + output token ids (list[int]); grows by `append_token`.
        block_table: KV block ids in order; block i holds token positions
            [i * block_size, (i + 1) * block_size). CPU block ids while SWAPPED. With a
            sliding window, leading entries of blocks that fell out of it are -1
            (`block_manager.WINDOW_FREED`).
        block_hashes: chained hashes of the full blocks of `token_ids` computed so far
            (filled lazily by the block manager; prefix of `token_ids` only, never stale
            because tokens are only appended).
        needs_fork: True for an `n > 1` request that has not been split into its samples
            yet; the scheduler forks it after prefilling all but the last prompt token.
        finish_reason: None while unfinished.
        stop_reason: the stop token id or stop string that ended it, if any.
        arrival_step: scheduler step at which it was added (fairness bound).
        arrival_order: position in the scheduler's arrival order (lower = higher priority);
            forked samples keep their parent's, so they rank with their request.
        num_preemptions: times it was preempted (recompute or swap).
    """

    __slots__ = (
        "arrival_order",
        "arrival_step",
        "block_hashes",
        "block_table",
        "cache_salt",
        "finish_reason",
        "needs_fork",
        "num_cached_tokens",
        "num_cached_tokens_by_tier",
        "num_computed_tokens",
        "num_preemptions",
        "num_prompt_tokens",
        "params",
        "request_id",
        "sample_index",
        "seq_id",
        "status",
        "stop_reason",
        "token_ids",
    )

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        params: SamplingParams,
        *,
        cache_salt: str | None = None,
        sample_index: int = 0,
    ) -> None:
        self.seq_id: int = next(_seq_ids)
        self.request_id = request_id
        self.sample_index = sample_index
        self.params = params
        self.cache_salt = cache_salt
        self.token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens: int = len(self.token_ids)
        self.status = SequenceStatus.WAITING
        self.num_computed_tokens = 0
        self.num_cached_tokens = 0
        #: `num_cached_tokens` split by where the blocks came from: (pool, ram, disk).
        self.num_cached_tokens_by_tier: tuple[int, int, int] = (0, 0, 0)
        self.block_table: list[int] = []
        self.block_hashes: list[int] = []
        self.needs_fork = params.n > 1
        self.finish_reason: FinishReason | None = None
        self.stop_reason: int | str | None = None
        self.arrival_step = 0
        self.arrival_order = 0
        self.num_preemptions = 0

    def __repr__(self) -> str:
        return (
            f"Sequence(seq_id={self.seq_id}, request_id={self.request_id!r}, "
            f"sample_index={self.sample_index}, status={self.status.name}, "
            f"num_tokens={self.num_tokens}, num_prompt_tokens={self.num_prompt_tokens}, "
            f"num_computed_tokens={self.num_computed_tokens}, blocks={self.block_table})"
        )

    # Read-only views -------------------------------------------------------------------------

    @property
    def sampling_params(self) -> SamplingParams:
        """Alias of `params` (vLLM's name)."""
        return self.params

    @property
    def num_tokens(self) -> int:
        """Prompt + output tokens so far."""
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        """Generated tokens so far."""
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def prompt_token_ids(self) -> list[int]:
        """A copy of the prompt's token ids."""
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def output_token_ids(self) -> list[int]:
        """A copy of the generated token ids."""
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def last_token_id(self) -> int:
        """The most recent token (the next decode step's input)."""
        return self.token_ids[-1]

    @property
    def is_finished(self) -> bool:
        """True once finished or aborted."""
        return self.status is SequenceStatus.FINISHED

    @property
    def is_prefill(self) -> bool:
        """True while prompt tokens remain to be computed (a prefill, possibly chunked)."""
        return self.num_computed_tokens < self.num_prompt_tokens

    @property
    def num_uncomputed_tokens(self) -> int:
        """Tokens whose K/V are not in the pool yet (1 for a sequence about to decode)."""
        return len(self.token_ids) - self.num_computed_tokens

    # Mutations (scheduler only) ---------------------------------------------------------------

    def append_token(self, token_id: int) -> None:
        """Append one sampled token id. Called by `Scheduler.postprocess`."""
        self.token_ids.append(token_id)

    def fork(self, sample_index: int) -> Sequence:
        """Return a copy for sample `sample_index` with a new `seq_id`.

        The child gets its own lists (token ids, block table, block hashes) with the same
        contents. Block reference counts are NOT incremented here: use `BlockManager.fork`,
        which calls this and then takes a reference on every shared block.
        """
        child = Sequence(
            self.request_id,
            self.token_ids[: self.num_prompt_tokens],
            self.params,
            cache_salt=self.cache_salt,
            sample_index=sample_index,
        )
        child.token_ids = list(self.token_ids)
        child.status = self.status
        child.num_computed_tokens = self.num_computed_tokens
        child.num_cached_tokens = self.num_cached_tokens
        child.num_cached_tokens_by_tier = self.num_cached_tokens_by_tier
        child.block_table = list(self.block_table)
        child.block_hashes = list(self.block_hashes)
        child.needs_fork = False
        child.arrival_step = self.arrival_step
        child.arrival_order = self.arrival_order
        return child
