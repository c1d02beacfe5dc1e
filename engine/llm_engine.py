"""The step API: add requests, call ``step()`` until done, read ``RequestOutput`` objects.

``LLMEngine`` ties the parts together, one direction only::

    add_request -> Scheduler (queues, token budget) -> BlockManager (blocks, prefix cache)
               -> ModelRunner (KV pool, model forward, Sampler) -> Scheduler.postprocess
               -> IncrementalDetokenizer (text, stop strings) -> RequestOutput

It is synchronous and single-threaded; the server runs it in its own loop thread and feeds it
through a queue. Per sequence it keeps the streaming detokenizer, the seeded RNG (seed +
sample_index, so the ``n`` samples of a seeded request differ but are reproducible) and the
logprobs gathered so far.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from promptcache.errors import ConfigError, InvalidRequestError

from .config import EngineConfig
from .detokenizer import IncrementalDetokenizer
from .loader import resolve_model_path
from .model_config import ModelConfig, read_generation_eos_ids
from .model_runner import ModelRunner
from .outputs import EngineStats, RequestOutput
from .sampler import TokenLogprobs
from .sampling_params import SamplingParams
from .scheduler import ScheduledBatch, Scheduler
from .sequence import Sequence

if TYPE_CHECKING:
    from .kv_events import KVEventRecorder
    from .kv_tiers import KVTiers

__all__ = ["LLMEngine"]

#: Natural text for the start-up KV-scale calibration of int8 / fp8 caches.
CALIBRATION_TEXT = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside in the "
    "park with her friends. One day, she found a big red ball under a tree. "
    "The quick brown fox jumps over the lazy dog. def main():\n    print('hello, world')\n"
    "User: What is the capital of France?\nAssistant: The capital of France is Paris. "
    '1, 2, 3, 4, 5, 6, 7, 8, 9, 10. {"key": [true, false, null]}'
)


@dataclass
class _SeqState:
    """Engine-side state of one running sequence."""

    detokenizer: IncrementalDetokenizer
    generator: torch.Generator | None
    num_detokenized: int = 0  # output tokens fed to the detokenizer
    num_reported: int = 0  # output tokens included in a RequestOutput already
    logprobs: list[TokenLogprobs] = field(default_factory=list)
    #: Logprobs of this step's sample rows (one, or one per draft plus one with speculative
    #: decoding); the first ``len(new tokens)`` belong to the tokens the step emitted.
    pending_logprobs: list[TokenLogprobs | None] = field(default_factory=list)


class LLMEngine:
    """Continuous-batching engine over a paged, prefix-cached KV pool.

    Args:
        config: engine configuration (``max_model_len`` None = the checkpoint's
            ``max_position_embeddings``); the engine keeps a filled-in copy as ``config``.

    Raises:
        ModelLoadError: the checkpoint cannot be found, fetched or loaded.
        ConfigError: an invalid setting (e.g. ``max_model_len`` beyond what the model supports).
    """

    def __init__(self, config: EngineConfig) -> None:
        from .tokenizer import Tokenizer

        model_dir = resolve_model_path(config.model)
        model_config = ModelConfig.from_pretrained(model_dir)
        config = dataclasses.replace(config, model=str(model_dir))
        limit = _max_supported_len(model_config)
        if config.max_model_len is None:
            config.max_model_len = model_config.max_position_embeddings
        elif config.max_model_len > limit:
            raise ConfigError(
                f"max_model_len={config.max_model_len} exceeds the {limit} positions this model "
                "supports (max_position_embeddings x rope scaling factor); lower max_model_len "
                f"(--max-model-len) to {limit} or less"
            )
        config.validate()
        self.config = config
        self.model_dir = model_dir
        self.tokenizer = Tokenizer.from_pretrained(model_dir)
        calibration = self.tokenizer.encode(CALIBRATION_TEXT)
        self.runner = ModelRunner(config, model_dir, calibration_token_ids=calibration)
        self.model_config = self.runner.model_config
        eos = set(model_config.eos_token_ids) | set(read_generation_eos_ids(model_dir))
        if self.tokenizer.eos_token_id is not None:
            eos.add(self.tokenizer.eos_token_id)
        self.eos_token_ids = frozenset(eos)
        windows = [w for w in model_config.sliding_windows if w is not None]
        self.scheduler = Scheduler(
            config,
            self.runner.num_blocks,
            self.eos_token_ids,
            # Blocks are freed only when every layer has a window (then the widest one).
            sliding_window=(
                max(windows)
                if windows and len(windows) == len(model_config.sliding_windows)
                else None
            ),
        )
        #: The RAM / disk cache tiers under the pool, or None (``kv_ram_bytes`` /
        #: ``kv_disk_dir``).
        self.kv_tiers: KVTiers | None = None
        if config.kv_ram_bytes or config.kv_disk_dir is not None:
            from .kv_tiers.build import build_kv_tiers

            self.kv_tiers = build_kv_tiers(config, self.runner, model_dir)
            self.runner.kv_tiers = self.kv_tiers
            self.scheduler.block_manager.tier_store = self.kv_tiers
        self._closed = False
        #: ``config.max_model_len`` capped by the KV pool's size in tokens: one sequence can
        #: never outgrow the pool, so this is the longest sequence the engine can ever finish
        #: (what the server enforces and reports as ``max_model_len``). With a sliding window
        #: that frees blocks, a sequence holds at most ``Scheduler.max_blocks_for`` blocks.
        fits = self.scheduler.max_blocks_for(config.max_model_len) <= self.runner.num_blocks
        self.effective_max_model_len = (
            config.max_model_len
            if fits
            else min(config.max_model_len, self.runner.num_blocks * config.block_size)
        )
        self._states: dict[int, _SeqState] = {}
        self._num_prompt_tokens = 0
        self._num_generated_tokens = 0

    @classmethod
    def from_pretrained(cls, model_path: str | Path, **config_overrides: Any) -> LLMEngine:
        """Build an engine for a checkpoint directory or Hub id; keywords set ``EngineConfig``
        fields (``block_size=16``, ``kv_cache_bytes=...``, ``enable_prefix_caching=False``...).

        Raises:
            ConfigError: an unknown or invalid keyword.
            ModelLoadError: the checkpoint cannot be loaded.
        """
        names = {f.name for f in dataclasses.fields(EngineConfig)}
        unknown = sorted(set(config_overrides) - names)
        if unknown:
            raise ConfigError(
                f"unknown engine option(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}"
            )
        return cls(EngineConfig(model=str(model_path), **config_overrides))

    # Requests --------------------------------------------------------------------------------

    def add_request(
        self,
        request_id: str,
        prompt: str | list[int],
        params: SamplingParams | None = None,
        *,
        cache_salt: str | None = None,
    ) -> None:
        """Queue a request.

        Args:
            request_id: unique among requests in flight.
            prompt: text (encoded with the model's BOS rules) or token ids (used as given;
                chat prompts are rendered and encoded with ``add_special_tokens=False``).
            params: sampling parameters (default ``SamplingParams()``).
            cache_salt: tenant key; requests with different salts never share cached blocks.

        Raises:
            InvalidRequestError: empty or too long prompt, token ids outside the vocabulary,
                a duplicate request id, or a request that can never fit the KV pool.
        """
        params = params if params is not None else SamplingParams()
        if isinstance(prompt, str):
            token_ids = self.tokenizer.encode(prompt)
        elif isinstance(prompt, (list, tuple)) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in prompt
        ):
            token_ids = [int(t) for t in prompt]
            vocab = self.model_config.vocab_size
            bad = [t for t in token_ids if not 0 <= t < vocab]
            if bad:
                raise InvalidRequestError(
                    f"prompt token id(s) {bad[:5]} are outside the vocabulary [0, {vocab})"
                )
        else:
            raise InvalidRequestError("a prompt must be a string or a list of token ids")
        seq = Sequence(request_id, token_ids, params, cache_salt=cache_salt)
        self.scheduler.add(seq)
        self._num_prompt_tokens += len(token_ids)

    def abort_request(self, request_id: str) -> None:
        """Finish a request with reason "abort" and free its KV blocks now (unknown id: no-op)."""
        for seq in self.scheduler.abort(request_id):
            self._states.pop(seq.seq_id, None)

    def has_unfinished_requests(self) -> bool:
        """True while any request is waiting, running or swapped out."""
        return self.scheduler.has_unfinished()

    # One step --------------------------------------------------------------------------------

    def step(self) -> list[RequestOutput]:
        """Run one scheduler step; return an output for every sequence that got a token.

        A step may produce nothing (e.g. a chunk of a long prompt); keep calling while
        ``has_unfinished_requests()``.
        """
        batch = self.scheduler.schedule()
        generators: dict[int, torch.Generator] = {}
        for entry in batch.seqs:
            state = self._state(entry.seq)
            if state.generator is not None:
                generators[entry.seq.seq_id] = state.generator
        result = self.runner.execute(batch, generators)
        if len(result.logprobs) != batch.num_sample_rows:
            raise ValueError(
                f"the runner sampled {len(result.logprobs)} rows for {batch.num_sample_rows}"
            )
        rows = iter(result.logprobs)
        for entry in batch.sampled_seqs:
            state = self._states[entry.seq.seq_id]
            state.pending_logprobs = [next(rows) for _ in range(entry.num_sample_rows)]
        progressed = self.scheduler.postprocess(batch, result.token_ids, self._check_stop)
        outputs = [self._output(seq) for seq in progressed]
        self._forget_finished(batch)
        return outputs

    def stats(self) -> EngineStats:
        """Queue lengths, KV usage and cumulative prefix-cache / preemption counters."""
        s = self.scheduler.stats()
        tiers = self.kv_tiers
        tier_blocks = {}
        if tiers is not None:
            tier_blocks = {"ram": tiers.num_ram_blocks, "disk": tiers.num_disk_blocks}
        return EngineStats(
            num_running=s.num_running,
            num_waiting=s.num_waiting,
            num_swapped=s.num_swapped,
            kv_usage=s.kv_usage,
            num_free_blocks=s.num_free_blocks,
            num_total_blocks=s.num_total_blocks,
            kv_cache_bytes=self.runner.kv_cache_bytes,
            prefix_cache_queries_tokens=s.prefix_cache_queries_tokens,
            prefix_cache_hits_tokens=s.prefix_cache_hits_tokens,
            num_preemptions=s.num_preemptions,
            num_prompt_tokens=self._num_prompt_tokens,
            num_generated_tokens=self._num_generated_tokens,
            prefix_cache_hits_tokens_by_tier=dict(
                self.scheduler.block_manager.prefix_cache_hits_tokens_by_tier
            ),
            kv_tier_blocks=tier_blocks,
            spec_decode_num_drafts=s.spec_decode_num_drafts,
            spec_decode_num_draft_tokens=s.spec_decode_num_draft_tokens,
            spec_decode_num_accepted_tokens=s.spec_decode_num_accepted_tokens,
        )

    def reset_prefix_cache(self, *, include_tiers: bool = True) -> None:
        """Forget every cached block hash (cold-cache benchmarks and tests).

        Args:
            include_tiers: also drop the RAM tier and delete the disk tier's block files;
                False forgets the pool's hashes only (the tiers still hit).
        """
        self.scheduler.block_manager.reset_prefix_cache()
        if include_tiers and self.kv_tiers is not None:
            self.kv_tiers.clear()

    def close(self) -> int:
        """Write the pool's and the RAM tier's cached blocks to the disk tier (``kv_disk_dir``),
        so a restarted engine finds them. Idempotent; call it between steps.

        Returns:
            Blocks written to disk by this call (0 without a disk tier, or when closed already).
        """
        if self._closed:
            return 0
        self._closed = True
        if self.kv_tiers is None:
            return 0
        return self.kv_tiers.flush(self.scheduler.block_manager.cached_blocks())

    def enable_kv_events(self) -> KVEventRecorder:
        """Record the prefix cache's changes as vLLM-format KV events from now on.

        Returns:
            The recorder; call its ``take()`` after each ``step()`` (or other call that can
            change the cache: ``reset_prefix_cache``) for the events since the last take. Calling
            this again replaces the recorder (events not taken from the old one stay there).
        """
        from .kv_events import KVEventRecorder

        recorder = KVEventRecorder(self.config.block_size)
        self.scheduler.block_manager.event_sink = recorder
        if self.kv_tiers is not None:
            self.kv_tiers.event_sink = recorder
        return recorder

    # Internals -------------------------------------------------------------------------------

    def _state(self, seq: Sequence) -> _SeqState:
        state = self._states.get(seq.seq_id)
        if state is None:
            seed = seq.params.seed
            generator = None
            if seed is not None:
                generator = torch.Generator().manual_seed(seed + seq.sample_index)
            detok = IncrementalDetokenizer(
                self.tokenizer, seq.prompt_token_ids, seq.params.stop_strings
            )
            state = _SeqState(detok, generator)
            # A forked sample starts with its parent's outputs (none: forks happen pre-sample).
            self._states[seq.seq_id] = state
        return state

    def _sync_text(self, seq: Sequence) -> str | None:
        """Feed tokens appended since the last call to the detokenizer; return a stop string."""
        state = self._states[seq.seq_id]
        new = seq.token_ids[seq.num_prompt_tokens + state.num_detokenized :]
        state.num_detokenized += len(new)
        return state.detokenizer.add_tokens(new)

    def _check_stop(self, seq: Sequence) -> bool:
        """The scheduler's stop checker: stop strings on the incrementally decoded text."""
        stop = self._sync_text(seq)
        if stop is None:
            return False
        seq.stop_reason = stop
        return True

    def _output(self, seq: Sequence) -> RequestOutput:
        state = self._states[seq.seq_id]
        self._sync_text(seq)
        output_ids = seq.output_token_ids
        new_ids = output_ids[state.num_reported :]
        pending = state.pending_logprobs[: len(new_ids)]
        state.logprobs.extend(lp for lp in pending if lp is not None)
        state.pending_logprobs = []
        state.num_reported = len(output_ids)
        self._num_generated_tokens += len(new_ids)
        return RequestOutput(
            request_id=seq.request_id,
            sample_index=seq.sample_index,
            prompt_token_ids=seq.prompt_token_ids,
            output_token_ids=output_ids,
            new_token_ids=new_ids,
            text=state.detokenizer.visible_text(seq.is_finished),
            finished=seq.is_finished,
            finish_reason=seq.finish_reason,
            stop_reason=seq.stop_reason,
            num_prompt_tokens=seq.num_prompt_tokens,
            num_cached_tokens=seq.num_cached_tokens,
            logprobs=list(state.logprobs) if seq.params.logprobs is not None else None,
            num_cached_tokens_by_tier=dict(
                zip(("pool", "ram", "disk"), seq.num_cached_tokens_by_tier, strict=True)
            ),
        )

    def _forget_finished(self, batch: ScheduledBatch) -> None:
        for entry in batch.seqs:
            if entry.seq.is_finished:
                self._states.pop(entry.seq.seq_id, None)


def _max_supported_len(config: ModelConfig) -> int:
    """Positions the model handles: max_position_embeddings, x factor for linear/dynamic RoPE."""
    scaling = config.rope_scaling
    if scaling is not None and scaling["rope_type"] in ("linear", "dynamic"):
        return int(config.max_position_embeddings * float(scaling["factor"]))
    return config.max_position_embeddings
