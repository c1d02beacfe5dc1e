"""Owns the model and the paged KV pool; turns a scheduled batch into sampled tokens.

Per step (``execute``):

1. copy blocks the scheduler asked to move: demotions to the RAM cache tier (``kv_tiers``),
   swap-out (device -> CPU pool), copy-on-write (device -> device), swap-in (CPU pool ->
   device), then loads from the cache tiers, in that order;
2. pack the new tokens of every scheduled sequence into ``input_ids`` / ``positions`` and build
   one ``AttnMetadata`` (slot mapping, padded block tables, context lengths, ``cu_seqlens_q``);
3. run the model (attention writes the new K/V into the pool as it goes);
4. take the hidden state of the last scheduled token of each sequence that completes its
   tokens this step, compute logits for those rows only, and sample.

KV pool: ``num_layers`` pairs of ``[num_blocks, block_size, num_kv_heads, head_dim]`` tensors,
allocated once. ``num_blocks`` is ``EngineConfig.num_blocks`` if set, else
``kv_cache_bytes // bytes_per_block`` with ``bytes_per_block = 2 * layers * block_size *
kv_heads * head_dim * element_bytes``. An int8 / fp8 pool also holds per-layer, per-KV-head fp32
scales, calibrated once at start-up (see ``calibrate_kv_scales``).
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from promptcache.errors import ConfigError

from .attention import get_backend
from .attention.base import AttnMetadata, KVCacheLayer
from .config import EngineConfig
from .cpu_decode import CpuDecodeUnavailable, FusedDecode, restore_dense_copies
from .heap import unmap_large_allocations
from .kv_pages import zeroed_pool
from .kv_quant import is_quantized, kv_cache_torch_dtype, scales_from_amax
from .kv_sizing import resolve_kv_cache_dtype
from .loader import load_model
from .sampler import Sampler, SampleRequest, SamplerOutput

if TYPE_CHECKING:
    from .kv_tiers import KVTiers
    from .scheduler import ScheduledBatch

__all__ = ["ModelRunner"]

_ENFORCE_PREFIX = re.compile(r"^\[enforce fail at [^\]]*\]\s*(\S+ == \S+\.\s*)?")

#: Tokens of the start-up calibration pass for quantised KV caches.
CALIBRATION_TOKENS = 256


class ModelRunner:
    """Loads the model, allocates the KV pool, and executes scheduled batches.

    Args:
        config: engine configuration; ``max_model_len`` must already be set.
        model_dir: local checkpoint directory.
        calibration_token_ids: prompt for the KV-scale calibration pass of an int8 / fp8 pool
            (natural text works best); default: a fixed pseudo-random token sequence.

    Raises:
        ModelLoadError: the checkpoint cannot be loaded.
        ConfigError: the byte budget holds no block, or an unknown backend / dtype.
    """

    def __init__(
        self,
        config: EngineConfig,
        model_dir: str | Path,
        calibration_token_ids: Sequence[int] | None = None,
    ) -> None:
        if config.max_model_len is None:
            raise ConfigError("max_model_len must be set before the model runner is built")
        self.config = config
        self.device = _usable_device(config.device)
        self.backend = get_backend(config.attention_backend)
        _check_backend_runs_on(config.attention_backend, self.device)
        if self.device.type == "cpu":  # freed buffers of 1 MiB or more leave the RSS
            unmap_large_allocations()
        if config.num_blocks is None:  # the pool takes at most kv_cache_bytes
            _check_fits_memory(
                config.kv_cache_bytes,
                self.device,
                "the KV cache",
                "kv_cache_bytes (--kv-cache-bytes)",
            )
        self.model, self.model_config = load_model(
            model_dir,
            self.backend,
            dtype=config.dtype,
            max_positions=config.max_model_len,
            device=self.device,
            weight_dtype=config.weight_dtype,
            pack_for_cpu_kernel=config.fused_cpu_decode is not False,
        )
        self.dtype = self.model.norm.weight.dtype  # (an int8 embedding has no float weight)
        # Whether the fused kernel can run, asked before the pool exists: "auto" is float16
        # there (the kernel converts it on load and store; half an fp32 pool's bytes).
        kernel_runs = False
        if config.fused_cpu_decode is not False and config.kv_cache_dtype == "auto":
            try:
                FusedDecode.check(self.model, self.device)
                kernel_runs = True
            except CpuDecodeUnavailable:
                pass  # FusedDecode.build below says why
        self.kv_dtype = kv_cache_torch_dtype(
            resolve_kv_cache_dtype(config.kv_cache_dtype, fused_kernel=kernel_runs), self.dtype
        )
        self.block_size = config.block_size
        mc = self.model_config
        kv_name = str(self.kv_dtype).removeprefix("torch.")
        self.bytes_per_block = mc.kv_bytes_per_token(kv_name) * self.block_size
        self.num_blocks = config.num_blocks or config.kv_cache_bytes // self.bytes_per_block
        if self.num_blocks < 1:
            raise ConfigError(
                f"kv_cache_bytes={config.kv_cache_bytes} holds no KV block of "
                f"{self.bytes_per_block} bytes; raise kv_cache_bytes or lower block_size"
            )
        self.kv_caches = self._allocate(
            self.num_blocks, self.device, "the KV cache", "kv_cache_bytes (--kv-cache-bytes)"
        )
        self.cpu_kv_caches = (
            self._allocate(
                config.num_cpu_blocks,
                torch.device("cpu"),
                "the CPU swap pool",
                "num_cpu_blocks (--swap-space)",
            )
            if config.preemption_mode == "swap"
            else []  # recompute mode never swaps: num_cpu_blocks is not allocated
        )
        self.sampler = Sampler(config.seed)
        #: The RAM / disk cache tiers under the pool (``promptcache.engine.kv_tiers``), or
        #: None; set by the engine once the pool's scales are calibrated.
        self.kv_tiers: KVTiers | None = None
        if is_quantized(self.kv_dtype):
            self.calibrate_kv_scales(calibration_token_ids)
        #: Every forward pass (prefill chunks and decode steps) runs through this
        #: (engine/cpu_decode), or None; ``fused_decode_unavailable`` then says why (None when
        #: turned off).
        self.fused_decode: FusedDecode | None = None
        self.fused_decode_unavailable: str | None = None
        if config.fused_cpu_decode is not False:
            try:
                self.fused_decode = FusedDecode.build(self.model, self.kv_caches, self.device)
            except CpuDecodeUnavailable as exc:
                restore_dense_copies(self.model)  # packed while loading, for the torch path
                if config.fused_cpu_decode:
                    raise ConfigError(
                        f"fused_cpu_decode=True (--fused-cpu-decode) cannot run: {exc}; leave "
                        "it unset to fall back to the torch path"
                    ) from None
                self.fused_decode_unavailable = str(exc)

    # KV pool --------------------------------------------------------------------------------

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes allocated for the device KV pool (K and V, all layers)."""
        return self.num_blocks * self.bytes_per_block

    def _allocate(
        self, num_blocks: int, device: torch.device, what: str, setting: str
    ) -> list[KVCacheLayer]:
        """``num_blocks`` zeroed blocks per layer for K and V on ``device`` (on the CPU resident
        page by page as blocks are first written: ``kv_pages.zeroed_pool``).

        Raises:
            ConfigError: the pool is larger than the device's memory, or the allocator refused
                it; the message names ``what`` and the ``setting`` to lower.
        """
        mc = self.model_config
        nbytes = num_blocks * self.bytes_per_block
        _check_fits_memory(nbytes, device, what, setting)
        shape = (num_blocks, self.block_size, mc.num_key_value_heads, mc.head_dim)
        try:
            pool = zeroed_pool(mc.num_hidden_layers, shape, self.kv_dtype, device)
            return [KVCacheLayer(k, v) for k, v in pool]
        # torch.OutOfMemoryError is a RuntimeError; a refused mmap an OSError
        except (RuntimeError, MemoryError, OSError) as exc:
            lines = str(exc).strip().splitlines() or [type(exc).__name__]
            # torch prefixes its C++ check ("[enforce fail at alloc_cpu.cpp:127] err == 0. ").
            reason = _ENFORCE_PREFIX.sub("", lines[0])
            raise ConfigError(
                f"could not allocate {nbytes:,} bytes ({_gib(nbytes)}) for {what} on {device} "
                f"({reason}); lower {setting}"
            ) from None

    @torch.inference_mode()
    def calibrate_kv_scales(self, token_ids: Sequence[int] | None = None) -> None:
        """Set per-layer, per-KV-head scales of a quantised pool from one unquantised pass.

        Runs ``token_ids`` (at most ``CALIBRATION_TOKENS``, default pseudo-random ids) through the
        model with a scratch pool in the model dtype, takes each head's largest |K| and |V| and
        turns them into scales with ``kv_quant.scales_from_amax`` (which adds headroom). Scales
        are fixed afterwards, so every cached block keeps one meaning for the engine's lifetime.
        """
        mc = self.model_config
        limit = min(CALIBRATION_TOKENS, self.config.max_model_len or CALIBRATION_TOKENS)
        ids = list(token_ids or [])[:limit]
        if len(ids) < 2:
            gen = torch.Generator().manual_seed(0)
            ids = torch.randint(0, mc.vocab_size, (limit,), generator=gen).tolist()
        n = len(ids)
        num_blocks = math.ceil(n / self.block_size)
        shape = (num_blocks, self.block_size, mc.num_key_value_heads, mc.head_dim)
        scratch = [
            KVCacheLayer(
                torch.zeros(shape, dtype=self.dtype, device=self.device),
                torch.zeros(shape, dtype=self.dtype, device=self.device),
            )
            for _ in range(mc.num_hidden_layers)
        ]
        meta = self.build_metadata(
            phase="prefill",
            slot_mapping=list(range(n)),
            block_tables=[list(range(num_blocks))],
            context_lens=[n],
            new_lens=[n],
        )
        positions = torch.arange(n, device=self.device)
        self.model(torch.tensor(ids, device=self.device), positions, scratch, meta)
        for layer, tmp in zip(self.kv_caches, scratch, strict=True):
            k_amax = tmp.k_cache.flatten(0, 1)[:n].abs().float().amax(dim=(0, 2))
            v_amax = tmp.v_cache.flatten(0, 1)[:n].abs().float().amax(dim=(0, 2))
            layer.k_scale = scales_from_amax(k_amax, self.kv_dtype)
            layer.v_scale = scales_from_amax(v_amax, self.kv_dtype)
        for cpu_layer, layer in zip(self.cpu_kv_caches, self.kv_caches, strict=False):
            cpu_layer.k_scale, cpu_layer.v_scale = layer.k_scale, layer.v_scale

    def swap_out(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy device blocks to the CPU pool: ``pairs`` of (device block, CPU block)."""
        self._copy(self.kv_caches, self.cpu_kv_caches, pairs)

    def swap_in(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy CPU-pool blocks back to the device: ``pairs`` of (CPU block, device block)."""
        self._copy(self.cpu_kv_caches, self.kv_caches, pairs)

    def copy_blocks(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy-on-write inside the device pool: ``pairs`` of (source block, destination)."""
        self._copy(self.kv_caches, self.kv_caches, pairs)

    @staticmethod
    def _copy(
        src: list[KVCacheLayer], dst: list[KVCacheLayer], pairs: Sequence[tuple[int, int]]
    ) -> None:
        if not pairs:
            return
        if not src or not dst:
            raise ConfigError("swapping needs a CPU pool: set num_cpu_blocks > 0")
        device_src = src[0].k_cache.device
        device_dst = dst[0].k_cache.device
        src_ids = torch.tensor([s for s, _ in pairs], device=device_src)
        dst_ids = torch.tensor([d for _, d in pairs], device=device_dst)
        for s, d in zip(src, dst, strict=True):
            d.k_cache[dst_ids] = s.k_cache[src_ids].to(device_dst)
            d.v_cache[dst_ids] = s.v_cache[src_ids].to(device_dst)

    # One step -------------------------------------------------------------------------------

    def build_metadata(
        self,
        phase: str,
        slot_mapping: Sequence[int],
        block_tables: Sequence[Sequence[int]],
        context_lens: Sequence[int],
        new_lens: Sequence[int],
    ) -> AttnMetadata:
        """Build ``AttnMetadata`` on the runner's device from per-sequence Python lists.

        Args:
            phase: "decode" or "prefill".
            slot_mapping: one slot per new token, all sequences packed in order.
            block_tables: each sequence's block ids (padded with -1 into a tensor here).
            context_lens: cached + new tokens per sequence after this step.
            new_lens: new tokens per sequence (their sum is ``len(slot_mapping)``).
        """
        dev = self.device
        width = max((len(t) for t in block_tables), default=0)
        tables = torch.full((len(block_tables), max(width, 1)), -1, dtype=torch.int32)
        for i, table in enumerate(block_tables):
            tables[i, : len(table)] = torch.tensor(table, dtype=torch.int32)
        cu = [0]
        for n in new_lens:
            cu.append(cu[-1] + n)
        return AttnMetadata(
            phase="decode" if phase == "decode" else "prefill",
            slot_mapping=torch.tensor(slot_mapping, dtype=torch.int64, device=dev),
            block_tables=tables.to(dev),
            context_lens=torch.tensor(context_lens, dtype=torch.int32, device=dev),
            cu_seqlens_q=torch.tensor(cu, dtype=torch.int32, device=dev),
            num_computed_tokens=torch.tensor(
                [c - n for c, n in zip(context_lens, new_lens, strict=True)],
                dtype=torch.int32,
                device=dev,
            ),
            max_seqlen_q=max(new_lens, default=0),
            max_seqlen_k=max(context_lens, default=0),
        )

    @torch.inference_mode()
    def execute(
        self,
        batch: ScheduledBatch,
        generators: Mapping[int, torch.Generator] | None = None,
    ) -> SamplerOutput:
        """Run one scheduled batch.

        Args:
            batch: the scheduler's ``ScheduledBatch``.
            generators: per ``seq_id`` RNGs for seeded requests.

        Returns:
            One sampled token (and logprobs) per sample row, in batch order: one per entry
            with ``samples`` set, and one more per speculative draft token of the entry
            (``ScheduledSeq.num_sample_rows``).
        """
        if self.kv_tiers is not None:
            self.kv_tiers.flush_demotions()  # evicted blocks still hold their bytes here
        self.swap_out(batch.blocks_to_swap_out)
        self.copy_blocks(batch.blocks_to_copy)
        self.swap_in(batch.blocks_to_swap_in)
        if self.kv_tiers is not None:
            self.kv_tiers.load(batch.blocks_to_load)
        elif batch.blocks_to_load:
            raise ConfigError("the batch loads cache-tier blocks but the runner has no tiers")
        entries = batch.seqs
        if not entries:
            return SamplerOutput([], [])
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        new_lens: list[int] = []
        for entry in entries:
            input_ids += entry.token_ids()
            positions += entry.positions()
            slots += entry.slot_mapping(self.block_size)
            new_lens.append(entry.num_scheduled_tokens)
        meta = self.build_metadata(
            phase="decode" if all(n == 1 for n in new_lens) else "prefill",
            slot_mapping=slots,
            block_tables=[entry.seq.block_table for entry in entries],
            context_lens=[entry.context_len for entry in entries],
            new_lens=new_lens,
        )
        sampling = [i for i, entry in enumerate(entries) if entry.samples]
        ends = list(itertools.accumulate(new_lens))
        # The last row of each sampling entry; with speculative drafts, the rows from its last
        # real token on (one per draft, plus the next token).
        rows = [r for i in sampling for r in range(ends[i] - entries[i].num_sample_rows, ends[i])]
        # Only the sampled rows' hidden states are needed (no prompt logprobs are computed):
        # the model cuts its last layer's o_proj / MLP and the final norm to those rows.
        ids = torch.tensor(input_ids, dtype=torch.int64, device=self.device)
        pos = torch.tensor(positions, dtype=torch.int64, device=self.device)
        output_rows = (
            None
            if len(rows) == len(input_ids)
            else torch.tensor(rows, dtype=torch.int64, device=self.device)
        )
        fused = self.fused_decode
        if fused is not None and min(slots) >= 0:
            hidden = fused(ids, pos, meta, output_rows=output_rows)
        else:
            hidden = self.model(ids, pos, self.kv_caches, meta, output_rows=output_rows)
        if not sampling:
            return SamplerOutput([], [])
        logits = self.model.compute_logits(hidden)
        gens = generators or {}
        requests = [
            SampleRequest(
                params=entries[i].seq.params,
                token_ids=entries[i].row_token_ids(row),
                num_prompt_tokens=entries[i].seq.num_prompt_tokens,
                generator=gens.get(entries[i].seq.seq_id),
            )
            for i in sampling
            for row in range(entries[i].num_sample_rows)
        ]
        return self.sampler(logits, requests)


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def _available_memory(device: torch.device) -> int | None:
    """Bytes ``device`` can still give: free GPU memory, or the CPU's ``MemAvailable``
    (/proc/meminfo; physical RAM where that file is missing). None if unknown.

    Read at each check, so memory already taken (the weights, a KV pool allocated before the
    swap pool) is not counted twice as free."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.mem_get_info(device)[0])
        if device.type == "cpu":
            try:
                with open("/proc/meminfo", encoding="ascii") as meminfo:
                    for line in meminfo:
                        if line.startswith("MemAvailable:"):
                            return int(line.split()[1]) * 1024  # the file counts kB
            except OSError:
                pass
            return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, RuntimeError, ValueError):  # no sysconf / no CUDA context
        return None
    return None


def _check_fits_memory(nbytes: int, device: torch.device, what: str, setting: str) -> None:
    """Refuse a pool larger than the memory ``device`` has available, before allocating it (an
    allocation the OS overcommits gets the process killed later, with no message).

    Raises:
        ConfigError: naming the sizes and the ``setting`` to lower.
    """
    available = _available_memory(device)
    if available is not None and nbytes > available:
        raise ConfigError(
            f"{what} would take {nbytes:,} bytes ({_gib(nbytes)}), more than the "
            f"{_gib(available)} of memory available on {device}; lower {setting}"
        )


def _check_backend_runs_on(backend: str, device: torch.device) -> None:
    """The ``triton`` backend's kernels need CUDA tensors, or the Triton interpreter on a CPU.

    The interpreter is switched on by ``TRITON_INTERPRET=1`` before ``promptcache.kernels`` is
    imported (the test suite does this); whether it is on is read from a compiled kernel, so
    the check agrees with what the kernels will do.

    Raises:
        ConfigError: ``backend='triton'`` on a CPU without the interpreter.
    """
    if backend != "triton" or device.type != "cpu":
        return
    from promptcache.kernels import runs_on_cpu

    if not runs_on_cpu():
        raise ConfigError(
            "attention_backend='triton' runs its kernels on CUDA, and device='cpu' was chosen: "
            "use attention_backend='torch' (--attention-backend torch) on a CPU, or "
            "device='cuda' (--device cuda) on a GPU; to run the Triton kernels on the CPU "
            "(slowly, for tests) set TRITON_INTERPRET=1 in the environment"
        )


def _usable_device(name: str) -> torch.device:
    """Parse ``name`` ("cpu", "cuda", "cuda:1") and check a tensor can be placed there.

    Raises:
        ConfigError: the string is not a torch device, or this machine / torch build lacks it
            (torch itself raises RuntimeError or AssertionError, deep inside the model load).
    """
    try:
        device = torch.device(name)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError, ValueError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"device={name!r} cannot be used here ({reason}); pass device='cpu', or 'cuda' / "
            "'cuda:<index>' on a machine with a CUDA build of torch and that GPU"
        ) from exc
    return device
