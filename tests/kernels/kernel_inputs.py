"""Inputs and checks shared by the kernel tests: random paged caches, error metric, bounds."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from promptcache.kernels.reference import quantize_ref

QUANTIZED = (torch.int8, torch.float8_e4m3fn)
QMAX = {torch.int8: 127.0, torch.float8_e4m3fn: 448.0}

#: Largest allowed ``rel_err`` of a kernel against the float64 reference computed from the same
#: inputs (for quantised caches: from the same codes), by the dtype of q.
KERNEL_BOUND = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}

#: Largest allowed ``rel_err`` of attention over a quantised cache against float64 attention over
#: the unquantised values (scale = per-head amax / qmax), for the decode test's shapes. Measured
#: over 2,000 random draws of those shapes with the reference: int8 max 4.4e-2 (p99.9 3.5e-2),
#: fp8 e4m3 max 1.6e-1 (p99.9 1.5e-1). See docs/kernels.md.
QUANTIZATION_BOUND = {torch.int8: 6e-2, torch.float8_e4m3fn: 2.5e-1}

FULL_GRID = os.environ.get("PROMPTCACHE_FULL_KERNEL_GRID") == "1"
"""Set PROMPTCACHE_FULL_KERNEL_GRID=1 to run every combination instead of the smoke grid."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.").replace("float8_e4m3fn", "fp8")


def randn(shape: tuple[int, ...], gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """Standard normal values in ``dtype``, never all zeros."""
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max over rows (token, head) of max|out - ref| / max|ref| within the row.

    Attention outputs are convex combinations of value rows, so a row's max is a natural scale;
    taking the worst row catches one bad head or token that a global norm would hide.
    """
    err = (out.to(torch.float64) - ref).abs().amax(-1)
    scale = ref.abs().amax(-1).clamp_min(1e-30)
    return float((err / scale).max())


def poisoned(like: torch.Tensor) -> torch.Tensor:
    """A NaN-filled tensor shaped like ``like``: any element a kernel fails to write stays NaN."""
    return torch.full_like(like, float("nan"))


@dataclass
class PagedKV:
    """A paged pool holding the contexts of a batch of sequences.

    ``k_values`` / ``v_values`` are the unquantised float32 values before they went into a
    quantised pool (same as the pool for unquantised dtypes).
    """

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    k_scale: torch.Tensor | None
    v_scale: torch.Tensor | None
    block_tables: torch.Tensor
    k_values: torch.Tensor
    v_values: torch.Tensor


def random_block_tables(
    lens: list[int], block_size: int, gen: torch.Generator, spare_blocks: int = 3
) -> tuple[torch.Tensor, int]:
    """Block tables whose blocks are drawn from a shuffled pool (non-contiguous, out of order).

    Rows are padded with -1 to one column more than the longest row needs. Returns
    ``(block_tables [num_seqs, max_blocks] int32, num_blocks)``.
    """
    needed = [-(-n // block_size) for n in lens]
    num_blocks = sum(needed) + spare_blocks
    pool = torch.randperm(num_blocks, generator=gen).tolist()
    tables = torch.full((len(lens), max(needed, default=0) + 1), -1, dtype=torch.int32)
    for row, count in enumerate(needed):
        tables[row, :count] = torch.tensor(pool[:count], dtype=torch.int32)
        pool = pool[count:]
    return tables, num_blocks


def random_paged_kv(
    lens: list[int],
    num_kv_heads: int,
    head_dim: int,
    block_size: int,
    cache_dtype: torch.dtype,
    gen: torch.Generator,
) -> PagedKV:
    """A pool with random K/V in every slot (unused slots too), quantised with per-head scales
    set from each head's amax when ``cache_dtype`` is int8 or float8_e4m3fn."""
    block_tables, num_blocks = random_block_tables(lens, block_size, gen)
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_values = randn(shape, gen, torch.float32)
    v_values = randn(shape, gen, torch.float32)
    if cache_dtype in QUANTIZED:
        k_scale = k_values.abs().amax((0, 1, 3)) / QMAX[cache_dtype]
        v_scale = v_values.abs().amax((0, 1, 3)) / QMAX[cache_dtype]
        k_cache = quantize_ref(k_values, k_scale, cache_dtype)
        v_cache = quantize_ref(v_values, v_scale, cache_dtype)
        return PagedKV(k_cache, v_cache, k_scale, v_scale, block_tables, k_values, v_values)
    k_cache, v_cache = k_values.to(cache_dtype), v_values.to(cache_dtype)
    return PagedKV(k_cache, v_cache, None, None, block_tables, k_cache.float(), v_cache.float())


def ragged_lens(block_size: int, gen: torch.Generator) -> list[int]:
    """1, block_size - 1, block_size, block_size + 1 and a many-block length, shuffled."""
    lens = [1, block_size - 1, block_size, block_size + 1, 9 * block_size + 5]
    order = torch.randperm(len(lens), generator=gen).tolist()
    return [lens[i] for i in order]
