"""Continuous batching: which sequences run in the next forward pass, and with how many tokens.

Pure Python (no torch). One step is::

    batch = scheduler.schedule()                 # plan; allocates KV blocks
    ...runner: swap out, copy, swap in, forward, sample for entries with `samples`...
    scheduler.postprocess(batch, sampled_ids)    # advance, append, stop, free

Policy, in order, within a token budget of `max_num_batched_tokens` and `max_num_seqs`:

1. Decode first: running sequences with one token to compute, oldest request first.
2. Then running sequences in the middle of a (chunked) prefill.
3. Then swapped-out sequences, if the step preempted nothing.
4. Then waiting sequences, if the step preempted nothing and nothing is still swapped: preempted
   and overdue requests (waiting more than `fairness_max_wait_steps` steps) in arrival order,
   then, with cache-aware scheduling, the longest cached prefix first (SGLang's
   longest-prefix-match, https://arxiv.org/abs/2312.07104, checked 2026-11-30). Admission
   stops at the first request that does not fit, so a large request is not overtaken forever.
   A waiting request whose next ``IN_BATCH_SHARE_MIN_TOKENS`` or more prompt tokens are full
   blocks another sequence computes in this very step waits one step instead (in-batch prefix
   sharing): blocks enter the prefix cache only once computed, so admitting it now would
   compute the same prefix twice in one forward pass, while next step it is a cache hit.
   Admission goes on to the next waiting request, so the deferral holds back no other request.

When the pool runs out, the lowest-priority running sequence not yet scheduled in this step is
preempted (the newest request first; possibly the one asking): by recompute (blocks freed; their
hashes stay cached, so the recompute is mostly prefix-cache hits) or by swap to the CPU pool.
`OutOfBlocksError` never leaves this module. Progress is guaranteed: the oldest running
sequence can always take every block of a lower-priority one, and `add` rejects a request that
could not fit the whole pool on its own.

Not thread-safe: call `add`, `abort`, `schedule` and `postprocess` from one thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from promptcache.errors import ConfigError, InvalidRequestError, OutOfBlocksError

from .block_manager import BlockManager, compute_slot_mapping
from .config import EngineConfig
from .sequence import FinishReason, Sequence, SequenceStatus
from .spec_decode import NgramProposer, SpeculativeConfig, accepted_length

__all__ = [
    "CACHE_AWARE_WINDOW",
    "IN_BATCH_SHARE_MIN_TOKENS",
    "ScheduledBatch",
    "ScheduledSeq",
    "Scheduler",
    "SchedulerStats",
    "StopChecker",
]

CACHE_AWARE_WINDOW = 128
"""Cache-aware ordering looks at the oldest this-many waiting requests; later ones wait in
arrival order. Bounds the per-step cost under a long queue (SGLang falls back to FCFS above
128 waiting requests for the same reason)."""

IN_BATCH_SHARE_MIN_TOKENS = 32
"""A waiting request is deferred one step when at least this many of its next prompt tokens
(whole blocks) are being computed by another sequence in the step being planned. SGLang's
scheduler defers on the same condition with the same 32-token threshold
(``IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD`` in python/sglang/srt/managers/
schedule_policy.py, checked 2026-12-01). Measured on SmolLM2-135M-Instruct, 16 requests
sharing a 1,024-token system prompt arriving together under the default 2,048-token budget:
the first step prefills the system prompt once, for request 1 alone (1.1 s); without the
deferral it also prefilled 992 tokens of request 2 (2.9 s). ``benchmarks/engine_vs_llamacpp.py``'s
shared-prefix figure runs this workload (docs/benchmarks.md#engine-vs-llamacpp)."""

StopChecker = Callable[[Sequence], bool]
"""Called after each appended token; True finishes the sequence with reason "stop" (the
engine uses it for stop strings on its incrementally detokenised text)."""


@dataclass(slots=True)
class ScheduledSeq:
    """One sequence's share of a step.

    Attributes:
        seq: the sequence (read `token_ids`, `block_table`, `params`; do not mutate).
        num_scheduled_tokens: new tokens computed this step (a prefill chunk, or 1 to decode).
        num_computed_tokens: tokens whose K/V are already in the pool before this step (prefix
            hits + earlier chunks + earlier steps): `seq.num_computed_tokens` when scheduled, and
            the attention metadata's `num_computed_tokens`. Not `seq.num_cached_tokens` (prefix
            hits at admission only).
        is_prefill: False only for a plain decode (one new token, past the prompt).
        samples: True when this step reaches the end of `seq.token_ids`, so the runner samples
            one token from the last position's logits.
        draft_token_ids: speculative draft tokens (prompt lookup) scheduled after the
            sequence's last token; they count in `num_scheduled_tokens` but are not in
            `seq.token_ids`. The runner samples one token per row from the last real token on
            (`num_sample_rows`), and `Scheduler.postprocess` keeps the confirmed prefix.
    """

    seq: Sequence
    num_scheduled_tokens: int
    num_computed_tokens: int
    is_prefill: bool
    samples: bool
    draft_token_ids: tuple[int, ...] = ()

    @property
    def num_sample_rows(self) -> int:
        """Logits rows sampled for this entry: 0, 1, or 1 + drafts (the last rows in order)."""
        return 1 + len(self.draft_token_ids) if self.samples else 0

    def row_token_ids(self, row: int) -> list[int]:
        """The tokens before sample row `row` (0..num_sample_rows-1): `seq.token_ids` and the
        first `row` drafts (the context of penalties for that row)."""
        if not row:
            return self.seq.token_ids
        return self.seq.token_ids + list(self.draft_token_ids[:row])

    @property
    def context_len(self) -> int:
        """Tokens in the KV cache after this step (attention `context_lens`)."""
        return self.num_computed_tokens + self.num_scheduled_tokens

    def token_ids(self) -> list[int]:
        """Input token ids for this step, `[num_scheduled_tokens]` (drafts last)."""
        if self.draft_token_ids:
            end = self.context_len - len(self.draft_token_ids)
            return self.seq.token_ids[self.num_computed_tokens : end] + list(self.draft_token_ids)
        return self.seq.token_ids[self.num_computed_tokens : self.context_len]

    def positions(self) -> range:
        """Token positions of the inputs (RoPE positions)."""
        return range(self.num_computed_tokens, self.context_len)

    def slot_mapping(self, block_size: int) -> list[int]:
        """KV slots (block_id * block_size + offset) where this step's K/V are stored."""
        return compute_slot_mapping(
            self.seq.block_table, block_size, self.num_computed_tokens, self.context_len
        )


@dataclass(slots=True)
class ScheduledBatch:
    """The plan for one forward pass. Valid until `postprocess` (or the next `schedule`).

    The runner must apply, in this order and before the forward pass:
    `blocks_to_swap_out` (device -> CPU), `blocks_to_copy` (device -> device, copy-on-write),
    `blocks_to_swap_in` (CPU -> device); each a list of (src_block_id, dst_block_id). Then
    `blocks_to_load`: (block hash, device block) pairs promoted from a lower cache tier
    (`promptcache.engine.kv_tiers`). Device blocks released by a swap-out may be reused later
    in the same step, hence first.

    Attributes:
        seqs: decode entries first, then prefill entries (each group oldest request first).
        preempted: sequences preempted while planning this step (for logging and stats).
        step: the scheduler's step counter for this batch.
        block_size: tokens per KV block.
    """

    seqs: list[ScheduledSeq] = field(default_factory=list)
    blocks_to_swap_out: list[tuple[int, int]] = field(default_factory=list)
    blocks_to_copy: list[tuple[int, int]] = field(default_factory=list)
    blocks_to_swap_in: list[tuple[int, int]] = field(default_factory=list)
    blocks_to_load: list[tuple[int, int]] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    step: int = 0
    block_size: int = 16

    @property
    def is_empty(self) -> bool:
        """True when nothing runs this step (the runner may skip the forward pass)."""
        return not self.seqs

    @property
    def num_scheduled_tokens(self) -> int:
        """Total new tokens in the forward pass (<= max_num_batched_tokens)."""
        return sum(s.num_scheduled_tokens for s in self.seqs)

    @property
    def phase(self) -> Literal["prefill", "decode"]:
        """ "decode" when every entry is a plain decode, else "prefill" (mixed batches too)."""
        return "prefill" if any(s.is_prefill for s in self.seqs) else "decode"

    @property
    def is_prefill(self) -> bool:
        """True unless every entry is a plain decode."""
        return self.phase == "prefill"

    @property
    def is_decode(self) -> bool:
        """True when every entry is a plain decode."""
        return self.phase == "decode"

    @property
    def decode_seqs(self) -> list[ScheduledSeq]:
        """Plain decode entries."""
        return [s for s in self.seqs if not s.is_prefill]

    @property
    def prefill_seqs(self) -> list[ScheduledSeq]:
        """Prefill entries (whole prompts, chunks, recomputes after preemption)."""
        return [s for s in self.seqs if s.is_prefill]

    @property
    def sampled_seqs(self) -> list[ScheduledSeq]:
        """Entries that sample a token, in batch order (`postprocess` expects ids in this order)."""
        return [s for s in self.seqs if s.samples]

    @property
    def num_sample_rows(self) -> int:
        """Tokens the runner samples: one per sampling entry plus one per draft token."""
        return sum(s.num_sample_rows for s in self.seqs)

    def slot_mapping(self) -> list[int]:
        """All entries' slots concatenated in batch order, `[num_scheduled_tokens]`."""
        return [slot for s in self.seqs for slot in s.slot_mapping(self.block_size)]


@dataclass(slots=True, frozen=True)
class SchedulerStats:
    """A snapshot of queue lengths and KV-cache counters (tokens and blocks)."""

    num_running: int
    num_waiting: int
    num_swapped: int
    num_free_blocks: int
    num_total_blocks: int
    kv_usage: float
    prefix_cache_queries_tokens: int
    prefix_cache_hits_tokens: int
    num_preemptions: int
    spec_decode_num_drafts: int = 0
    spec_decode_num_draft_tokens: int = 0
    spec_decode_num_accepted_tokens: int = 0


class Scheduler:
    """Plans each step's batch and owns the `BlockManager`.

    Args:
        config: validated config; `max_model_len` must be set (the engine fills it at load).
        num_blocks: device KV blocks the runner allocated (from `kv_cache_bytes` or
            `config.num_blocks`).
        eos_token_ids: the model's end-of-sequence ids (finish with "stop" unless ignore_eos).
        sliding_window: tokens every layer attends back over (the largest layer window), or
            None when some layer attends to its whole context. Blocks that fall out of it are
            freed during the run (`BlockManager`), so a sequence's need for blocks is bounded
            by `max_blocks_for`.

    With ``config.speculative_config`` set, each decode may carry prompt-lookup draft tokens
    (`spec_decode.NgramProposer`): at most ``num_speculative_tokens``, fewer when the
    sequence's acceptance so far does not pay for more (`spec_decode.draft_length`; none for
    natural text with chance matches, nor for a growing pause after a verify that kept no
    draft), or when the token budget, ``max_tokens``,
    ``max_model_len`` or the free blocks (one block per running sequence is held back, so
    drafts never cause a preemption) leave less room. Drafts are
    never marked computed: `postprocess` marks the last token plus the accepted drafts, then
    releases the blocks that held only rejected ones (`BlockManager.trim_to_computed`), so
    `num_computed_tokens` never goes back and no block registered in the prefix cache ever
    holds a rejected token.

    Raises:
        ConfigError: `max_model_len` unset or `num_blocks` < 1.
    """

    def __init__(
        self,
        config: EngineConfig,
        num_blocks: int,
        eos_token_ids: Iterable[int] = (),
        *,
        sliding_window: int | None = None,
    ) -> None:
        config.validate()
        if config.max_model_len is None:
            raise ConfigError("max_model_len must be set before the scheduler is built")
        if num_blocks < 1:
            raise ConfigError(f"the KV pool needs at least 1 block, got {num_blocks}")
        self.config = config
        self.max_model_len: int = config.max_model_len
        self.eos_token_ids = frozenset(eos_token_ids)
        num_cpu_blocks = config.num_cpu_blocks if config.preemption_mode == "swap" else 0
        self.block_manager = BlockManager(
            num_blocks,
            config.block_size,
            enable_prefix_caching=config.enable_prefix_caching,
            num_cpu_blocks=num_cpu_blocks,
            sliding_window=sliding_window,
        )
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.swapped: list[Sequence] = []
        self.num_preemptions = 0
        self._requests: dict[str, list[Sequence]] = {}
        self._step = 0
        self._arrivals = 0
        self._budget = 0  # tokens left in the step being planned
        self._scheduled: set[int] = set()  # seq_ids given an entry in the step being planned
        self._in_flight: set[int] = set()  # hashes of full blocks computed by the planned step
        spec = config.speculative_config
        #: Prompt-lookup drafts for decodes, or None (no speculative decoding).
        self.proposer: NgramProposer | None = (
            NgramProposer(SpeculativeConfig.parse(spec)) if spec is not None else None
        )
        self.spec_decode_num_drafts = 0  # decode steps that carried a draft
        self.spec_decode_num_draft_tokens = 0  # draft tokens proposed and verified
        self.spec_decode_num_accepted_tokens = 0  # of those, tokens that became output

    # Requests --------------------------------------------------------------------------------

    def add(self, seq: Sequence) -> None:
        """Queue a new request (one Sequence; `params.n > 1` is forked later).

        Raises:
            InvalidRequestError: empty prompt, prompt leaving no room under max_model_len,
                `n` above max_num_seqs, a request that could not fit the whole KV pool, or a
                request id already in flight.
        """
        cfg = self.config
        num_prompt = seq.num_prompt_tokens
        if seq.status is not SequenceStatus.WAITING or seq.num_tokens != num_prompt:
            raise InvalidRequestError(f"sequence {seq.seq_id} was already scheduled once")
        if num_prompt == 0:
            raise InvalidRequestError("the prompt is empty: send at least one token")
        if num_prompt >= self.max_model_len:
            raise InvalidRequestError(
                f"the prompt has {num_prompt} tokens but max_model_len is {self.max_model_len}; "
                "shorten the prompt so at least one output token fits"
            )
        if seq.params.n > cfg.max_num_seqs:
            raise InvalidRequestError(
                f"n={seq.params.n} exceeds max_num_seqs={cfg.max_num_seqs}; lower n"
            )
        max_len = min(num_prompt + seq.params.max_tokens, self.max_model_len)
        bm = self.block_manager
        needed = self.max_blocks_for(max_len)
        if needed > bm.num_blocks:
            raise InvalidRequestError(
                f"the request may reach {max_len} tokens = {needed} KV blocks, but the pool has "
                f"{bm.num_blocks}: lower max_tokens or shorten the prompt (or give the engine a "
                "larger kv_cache_bytes)"
            )
        if seq.request_id in self._requests:
            raise InvalidRequestError(f"request id {seq.request_id!r} is already in flight")
        seq.arrival_step = self._step
        seq.arrival_order = self._arrivals
        self._arrivals += 1
        self._requests[seq.request_id] = [seq]
        self.waiting.append(seq)

    def max_blocks_for(self, num_tokens: int) -> int:
        """The most KV blocks one sequence of `num_tokens` tokens can hold at once.

        ``ceil(num_tokens / block_size)``; with a sliding window W at most
        ``ceil((W + max_num_batched_tokens) / block_size) + 1`` of them: a step's new tokens
        (at most the token budget) and the W - 1 positions before them, which may start
        inside a block.
        """
        bm = self.block_manager
        whole = -(-num_tokens // bm.block_size)
        if bm.sliding_window is None:
            return whole
        span = bm.sliding_window + self.config.max_num_batched_tokens
        return min(whole, -(-span // bm.block_size) + 1)

    def abort(self, request_id: str) -> list[Sequence]:
        """Finish every sequence of `request_id` with reason "abort" and free its blocks now.

        Returns the aborted sequences (empty if the id is unknown or already finished). The
        blocks are released immediately, so abort between steps, or after the runner has built
        its inputs from the current batch; `postprocess` then skips the aborted sequences.
        """
        seqs = self._requests.pop(request_id, [])
        aborted = [s for s in seqs if not s.is_finished]
        for seq in aborted:
            self._finish(seq, "abort", forget=False)
        return aborted

    def get_sequences(self, request_id: str) -> list[Sequence]:
        """Unfinished sequences of a request (one per sample once forked); [] if unknown."""
        return [s for s in self._requests.get(request_id, []) if not s.is_finished]

    def has_unfinished(self) -> bool:
        """True while any sequence is waiting, running or swapped."""
        return bool(self.waiting or self.running or self.swapped)

    def stats(self) -> SchedulerStats:
        """Counters for metrics and tests. Changes nothing."""
        bm = self.block_manager
        return SchedulerStats(
            num_running=len(self.running),
            num_waiting=len(self.waiting),
            num_swapped=len(self.swapped),
            num_free_blocks=bm.num_free_blocks,
            num_total_blocks=bm.num_blocks,
            kv_usage=bm.usage,
            prefix_cache_queries_tokens=bm.prefix_cache_queries_tokens,
            prefix_cache_hits_tokens=bm.prefix_cache_hits_tokens,
            num_preemptions=self.num_preemptions,
            spec_decode_num_drafts=self.spec_decode_num_drafts,
            spec_decode_num_draft_tokens=self.spec_decode_num_draft_tokens,
            spec_decode_num_accepted_tokens=self.spec_decode_num_accepted_tokens,
        )

    def check_integrity(self) -> None:
        """Block-manager invariants over every live sequence (AssertionError if broken)."""
        self.block_manager.check_integrity([*self.running, *self.waiting, *self.swapped])

    # One step --------------------------------------------------------------------------------

    def schedule(self) -> ScheduledBatch:
        """Plan the next forward pass.

        Changes state: allocates blocks, moves sequences between queues, forks `n > 1`
        requests whose prompt is computed up to its last token, preempts when blocks run out.
        Does not advance `num_computed_tokens` (that happens in `postprocess`).
        """
        self._step += 1
        batch = ScheduledBatch(step=self._step, block_size=self.block_manager.block_size)
        self._budget = self.config.max_num_batched_tokens
        self._scheduled = set()
        self._in_flight = set()
        for seq in [s for s in self.running if self._at_fork_point(s)]:
            self._fork(seq)
        by_priority = sorted(self.running, key=_priority)
        decodes = [s for s in by_priority if s.num_uncomputed_tokens == 1 and not s.is_prefill]
        others = [s for s in by_priority if s.num_uncomputed_tokens != 1 or s.is_prefill]
        for seq in decodes + others:
            if self._budget == 0:
                break
            if seq.status is SequenceStatus.RUNNING:  # not preempted earlier in this step
                self._schedule_running(seq, batch)
        if not batch.preempted:
            self._schedule_swapped(batch)
            if not self.swapped:
                self._schedule_waiting(batch)
        batch.seqs.sort(key=lambda s: (s.is_prefill, _priority(s.seq)))
        return batch

    def postprocess(
        self,
        batch: ScheduledBatch,
        sampled_token_ids: Iterable[int],
        stop_checker: StopChecker | None = None,
    ) -> list[Sequence]:
        """Apply a finished forward pass.

        Args:
            batch: the batch returned by the last `schedule()`.
            sampled_token_ids: one token id per sample row (`ScheduledSeq.num_sample_rows`:
                one per entry of `batch.sampled_seqs`, plus one per draft token), in order.
            stop_checker: optional extra stop test (stop strings), see `StopChecker`.

        Changes state: advances each sequence's computed tokens (registering newly full blocks
        in the prefix cache), appends sampled tokens, finishes sequences on EOS (unless
        ignore_eos), a stop token id, the stop checker, max_tokens or max_model_len, and frees
        their blocks. An entry with drafts gets the accepted drafts and the target's next
        token (`spec_decode.accepted_length`), each checked for a stop in turn; the blocks
        that held only rejected drafts are released. Sequences aborted since `schedule()`
        are skipped.

        Returns:
            Sequences that received a token this step (finished ones included), batch order.

        Raises:
            ValueError: the number of token ids differs from `batch.num_sample_rows`.
        """
        token_ids = list(sampled_token_ids)
        if len(token_ids) != batch.num_sample_rows:
            raise ValueError(
                f"got {len(token_ids)} sampled token ids for {batch.num_sample_rows} sample rows; "
                "pass one id per row of batch.sampled_seqs (num_sample_rows each)"
            )
        tokens = iter(token_ids)
        progressed: list[Sequence] = []
        for entry in batch.seqs:
            if entry.draft_token_ids:
                rows = [next(tokens) for _ in range(entry.num_sample_rows)]
                if self._postprocess_draft(entry, rows, batch.step, stop_checker):
                    progressed.append(entry.seq)
                continue
            token_id = next(tokens) if entry.samples else None
            seq = entry.seq
            if seq.status is not SequenceStatus.RUNNING:
                continue  # aborted after schedule()
            if seq.num_computed_tokens != entry.num_computed_tokens:
                raise ValueError(f"batch of step {batch.step} was already applied to {seq!r}")
            self.block_manager.mark_computed(seq, entry.num_scheduled_tokens)
            if token_id is None:
                continue
            if self.proposer is not None:
                self.proposer.observe_token(seq.seq_id, seq.num_tokens, token_id)
            seq.append_token(token_id)
            reason = self._stop_reason(seq, token_id, stop_checker)
            if reason is not None:
                self._finish(seq, reason)
            progressed.append(seq)
        return progressed

    # Internals -------------------------------------------------------------------------------

    def _postprocess_draft(
        self,
        entry: ScheduledSeq,
        target_ids: list[int],
        step: int,
        stop_checker: StopChecker | None,
    ) -> bool:
        """Apply a decode verified with drafts; True when the sequence got tokens."""
        seq = entry.seq
        if seq.status is not SequenceStatus.RUNNING:
            return False  # aborted after schedule()
        if seq.num_computed_tokens != entry.num_computed_tokens:
            raise ValueError(f"batch of step {step} was already applied to {seq!r}")
        drafts = entry.draft_token_ids
        accepted = accepted_length(drafts, target_ids)
        reason: FinishReason | None = None
        emitted = 0
        for token_id in target_ids[: accepted + 1]:
            seq.append_token(token_id)
            emitted += 1
            reason = self._stop_reason(seq, token_id, stop_checker)
            if reason is not None:
                break
        kept = min(accepted, emitted)  # drafts that became output
        if self.proposer is not None:
            self.proposer.observe(seq.seq_id, accepted, len(drafts))
        self.spec_decode_num_drafts += 1
        self.spec_decode_num_draft_tokens += len(drafts)
        self.spec_decode_num_accepted_tokens += kept
        bm = self.block_manager
        # K/V of the last token and of the kept drafts are exact; the rest are never marked.
        bm.mark_computed(seq, entry.num_scheduled_tokens - len(drafts) + kept)
        if reason is not None:
            self._finish(seq, reason)
        else:
            bm.trim_to_computed(seq)
        return True

    def _at_fork_point(self, seq: Sequence) -> bool:
        return seq.needs_fork and seq.num_computed_tokens == seq.num_prompt_tokens - 1

    def _target_tokens(self, seq: Sequence) -> int:
        """Tokens to have computed before the next sample (n > 1 parents stop one short)."""
        return seq.num_prompt_tokens - 1 if seq.needs_fork else seq.num_tokens

    def _fork(self, parent: Sequence) -> list[Sequence]:
        children = [self.block_manager.fork(parent, i) for i in range(1, parent.params.n)]
        parent.needs_fork = False
        self.running.extend(children)
        self._requests[parent.request_id].extend(children)
        return [parent, *children]

    def _chunk(self, seq: Sequence, num_computed: int) -> int:
        """New tokens for `seq` this step under the remaining budget (0 = does not fit)."""
        remaining = self._target_tokens(seq) - num_computed
        if remaining <= self._budget:
            return remaining
        return self._budget if self.config.enable_chunked_prefill else 0

    def _entry(self, seq: Sequence, num_new: int) -> ScheduledSeq:
        start = seq.num_computed_tokens
        is_decode = num_new == 1 and start >= seq.num_prompt_tokens
        return ScheduledSeq(
            seq=seq,
            num_scheduled_tokens=num_new,
            num_computed_tokens=start,
            is_prefill=not is_decode,
            samples=start + num_new == seq.num_tokens and not seq.needs_fork,
        )

    def _draft(self, seq: Sequence) -> tuple[int, ...]:
        """Prompt-lookup drafts for a decode of `seq` that fit this step without preempting."""
        proposer = self.proposer
        if proposer is None or seq.num_uncomputed_tokens != 1 or seq.is_prefill:
            return ()
        if seq.needs_fork:
            return ()
        room = min(
            self._budget - 1,
            seq.params.max_tokens - seq.num_output_tokens - 1,
            self.max_model_len - seq.num_tokens - 1,
        )
        drafts = proposer.propose(seq.seq_id, seq.token_ids, room)
        bm = self.block_manager
        reserve = len(self.running)  # one block per running sequence stays free for decodes
        while drafts and bm.num_free_blocks - bm.append_cost(seq, 1 + len(drafts)) < reserve:
            drafts.pop()
        return tuple(drafts)

    def _schedule_running(self, seq: Sequence, batch: ScheduledBatch) -> None:
        num_new = self._chunk(seq, seq.num_computed_tokens)
        if num_new == 0:
            return
        drafts = self._draft(seq) if num_new == 1 else ()
        if drafts:
            batch.blocks_to_copy.extend(self.block_manager.append_slots(seq, 1 + len(drafts)))
            self._add_entry(seq, 1 + len(drafts), batch, drafts)
            return
        while True:
            try:
                batch.blocks_to_copy.extend(self.block_manager.append_slots(seq, num_new))
                break
            except OutOfBlocksError:
                victim = max(
                    (s for s in self.running if s.seq_id not in self._scheduled), key=_priority
                )
                self._preempt(victim, batch)
                if victim is seq:
                    return
        self._add_entry(seq, num_new, batch)

    def _add_entry(
        self, seq: Sequence, num_new: int, batch: ScheduledBatch, drafts: tuple[int, ...] = ()
    ) -> None:
        entry = self._entry(seq, num_new)
        if drafts:
            entry.draft_token_ids = drafts
            entry.is_prefill = False
            entry.samples = True
        batch.seqs.append(entry)
        self._scheduled.add(seq.seq_id)
        self._budget -= num_new
        bm = self.block_manager
        if entry.is_prefill and bm.enable_prefix_caching:
            start, end = seq.num_computed_tokens, seq.num_computed_tokens + num_new
            hashes = bm.block_hashes(seq)
            self._in_flight.update(hashes[start // bm.block_size : end // bm.block_size])

    def _in_flight_prefix_tokens(self, seq: Sequence, num_cached: int) -> int:
        """Prompt tokens of `seq` after its `num_cached` that the planned step computes anyway.

        Counts the leading run of `seq`'s next full blocks whose hashes are in blocks another
        scheduled sequence completes this step (the hash chain makes a match a shared prefix).
        """
        bm = self.block_manager
        if not self._in_flight:
            return 0
        bs = bm.block_size
        run = 0
        for block_hash in bm.block_hashes(seq)[num_cached // bs : (seq.num_tokens - 1) // bs]:
            if block_hash not in self._in_flight:
                break
            run += 1
        return run * bs

    def _preempt(self, seq: Sequence, batch: ScheduledBatch) -> None:
        bm = self.block_manager
        self.running.remove(seq)
        if self.config.preemption_mode == "swap" and bm.can_swap_out(seq):
            batch.blocks_to_swap_out.extend(bm.swap_out(seq))
            seq.status = SequenceStatus.SWAPPED
            self.swapped.append(seq)
        else:
            bm.free(seq)
            seq.num_computed_tokens = 0
            seq.status = SequenceStatus.WAITING
            self.waiting.insert(0, seq)
        seq.num_preemptions += 1
        self.num_preemptions += 1
        batch.preempted.append(seq)

    def _schedule_swapped(self, batch: ScheduledBatch) -> None:
        bm = self.block_manager
        for seq in sorted(self.swapped, key=_priority):
            if self._budget == 0 or len(self.running) >= self.config.max_num_seqs:
                return
            num_new = self._chunk(seq, seq.num_computed_tokens)
            at_fork_point = self._at_fork_point(seq)
            if (num_new == 0 and not at_fork_point) or not bm.can_swap_in(seq, max(num_new, 1)):
                return
            batch.blocks_to_swap_in.extend(bm.swap_in(seq))
            self.swapped.remove(seq)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            if at_fork_point:
                self._start_samples(seq, batch)
            else:
                batch.blocks_to_copy.extend(bm.append_slots(seq, num_new))
                self._add_entry(seq, num_new, batch)

    def _admission_order(self) -> list[Sequence]:
        """Preempted and overdue requests in queue order, then the rest (cache-aware or FCFS)."""
        cfg = self.config
        if not (cfg.cache_aware_scheduling and cfg.enable_prefix_caching):
            return sorted(self.waiting, key=lambda s: (s.num_preemptions == 0, _priority(s)))
        urgent: list[Sequence] = []
        rest: list[Sequence] = []
        for seq in self.waiting:
            overdue = self._step - seq.arrival_step > cfg.fairness_max_wait_steps
            (urgent if seq.num_preemptions or overdue else rest).append(seq)
        urgent.sort(key=lambda s: (s.num_preemptions == 0, _priority(s)))
        rest.sort(key=_priority)
        window, later = rest[:CACHE_AWARE_WINDOW], rest[CACHE_AWARE_WINDOW:]
        cached = self.block_manager.cached_prefix_tokens
        window.sort(key=lambda s: (-cached(s), _priority(s)))
        return urgent + window + later

    def _schedule_waiting(self, batch: ScheduledBatch) -> None:
        bm = self.block_manager
        for seq in self._admission_order():
            width = seq.params.n if seq.needs_fork else 1
            if self._budget == 0 or len(self.running) + width > self.config.max_num_seqs:
                return
            match = bm.prepare_tier_hits(seq, bm.match_prefix(seq))
            shared = self._in_flight_prefix_tokens(seq, match.num_cached_tokens)
            if shared >= IN_BATCH_SHARE_MIN_TOKENS:
                continue  # a prefix-cache hit next step (module docstring)
            num_new = self._chunk(seq, match.num_cached_tokens)
            at_fork_point = seq.needs_fork and match.num_cached_tokens == seq.num_prompt_tokens - 1
            if (num_new == 0 and not at_fork_point) or not bm.can_allocate(seq, match, num_new):
                return
            bm.allocate(seq, match, num_new)
            batch.blocks_to_load.extend(bm.take_loads())
            self.waiting.remove(seq)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            if num_new:
                self._add_entry(seq, num_new, batch)
            else:  # prompt cached up to its last token: fork now
                self._start_samples(seq, batch)

    def _start_samples(self, parent: Sequence, batch: ScheduledBatch) -> None:
        """Fork a RUNNING parent at its fork point and schedule the samples that fit as is.

        Used outside the running pass, so it never preempts: samples that do not fit this step
        run in the next one.
        """
        for sample in self._fork(parent):
            if self._budget == 0 or not self.block_manager.can_append_slots(sample, 1):
                return
            self._schedule_running(sample, batch)

    def _stop_reason(
        self, seq: Sequence, token_id: int, stop_checker: StopChecker | None
    ) -> FinishReason | None:
        params = seq.params
        if not params.ignore_eos and token_id in self.eos_token_ids:
            seq.stop_reason = token_id
            return "stop"
        if token_id in params.stop_token_id_set:
            seq.stop_reason = token_id
            return "stop"
        if stop_checker is not None and stop_checker(seq):
            return "stop"
        if seq.num_output_tokens >= params.max_tokens or seq.num_tokens >= self.max_model_len:
            return "length"
        return None

    def _finish(self, seq: Sequence, reason: FinishReason, *, forget: bool = True) -> None:
        for queue in (self.running, self.waiting, self.swapped):
            if seq in queue:
                queue.remove(seq)
                break
        self.block_manager.free(seq)
        if self.proposer is not None:
            self.proposer.forget(seq.seq_id)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
        if forget and not self.get_sequences(seq.request_id):
            self._requests.pop(seq.request_id, None)


def _priority(seq: Sequence) -> tuple[int, int]:
    """Sort key: older requests first, then sample index (lower = more important)."""
    return (seq.arrival_order, seq.sample_index)
