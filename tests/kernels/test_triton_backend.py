"""The engine's ``triton`` attention backend agrees with the ``torch`` backend, step by step."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
from kernel_inputs import dtype_name, randn, random_paged_kv, rel_err

from promptcache.engine.attention import get_backend
from promptcache.engine.attention.base import AttnMetadata

NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE = 4, 2, 16, 8


def _metadata(
    phase: str, block_tables: torch.Tensor, cached: list[int], new: list[int]
) -> AttnMetadata:
    """Metadata for sequences with ``cached`` tokens in the pool and ``new`` tokens this step."""
    slots = [
        int(block_tables[i, p // BLOCK_SIZE]) * BLOCK_SIZE + p % BLOCK_SIZE
        for i, (c, n) in enumerate(zip(cached, new, strict=True))
        for p in range(c, c + n)
    ]
    context = [c + n for c, n in zip(cached, new, strict=True)]
    return AttnMetadata(
        phase="decode" if phase == "decode" else "prefill",
        slot_mapping=torch.tensor(slots, dtype=torch.int64),
        block_tables=block_tables,
        context_lens=torch.tensor(context, dtype=torch.int32),
        cu_seqlens_q=torch.tensor([0, *itertools.accumulate(new)], dtype=torch.int32),
        num_computed_tokens=torch.tensor(cached, dtype=torch.int32),
        max_seqlen_q=max(new),
        max_seqlen_k=max(context),
    )


@pytest.mark.parametrize(
    ("model_dtype", "cache_dtype"),
    [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16), (torch.float32, torch.int8)],
    ids=lambda d: dtype_name(d),
)
def test_prefill_then_decode_match_the_torch_backend(
    model_dtype: torch.dtype, cache_dtype: torch.dtype, gen: torch.Generator
) -> None:
    cached, new = [0, 5, 8, 17], [11, 1, 9, 4]  # a plain prefill, and prefix-cache hits
    decode_steps = 3
    total = [c + n + decode_steps for c, n in zip(cached, new, strict=True)]
    pool = random_paged_kv(total, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE, cache_dtype, gen)
    caches = {name: (pool.k_cache.clone(), pool.v_cache.clone()) for name in ("torch", "triton")}
    backends = {name: get_backend(name) for name in caches}
    assert backends["triton"].name == "triton"
    bound = 1e-5 if model_dtype == torch.float32 else 1e-2

    steps = [("prefill", cached, new)]
    context = [c + n for c, n in zip(cached, new, strict=True)]
    for _ in range(decode_steps):
        steps.append(("decode", context, [1] * len(context)))
        context = [c + 1 for c in context]

    for phase, step_cached, step_new in steps:
        meta = _metadata(phase, pool.block_tables, step_cached, step_new)
        num_tokens = sum(step_new)
        q = randn((num_tokens, NUM_HEADS, HEAD_DIM), gen, model_dtype)
        k = randn((num_tokens, NUM_KV_HEADS, HEAD_DIM), gen, model_dtype)
        v = randn((num_tokens, NUM_KV_HEADS, HEAD_DIM), gen, model_dtype)
        outs = {
            name: backends[name].forward(
                q, k, v, *caches[name], meta, HEAD_DIM**-0.5, pool.k_scale, pool.v_scale
            )
            for name in backends
        }
        # the pools hold the same bits after every step (same quantisation rule)
        assert torch.equal(
            caches["torch"][0].view(torch.uint8), caches["triton"][0].view(torch.uint8)
        )
        assert torch.equal(
            caches["torch"][1].view(torch.uint8), caches["triton"][1].view(torch.uint8)
        )
        if phase == "prefill" and cache_dtype == torch.int8:
            # triton attends to the new tokens unquantised, torch reads them back quantised
            continue
        reference = outs["torch"].to(torch.float64)
        assert rel_err(outs["triton"], reference) <= bound, phase


@pytest.mark.parametrize("window", [1, 6, 20])
def test_a_sliding_window_matches_the_torch_backend(window: int, gen: torch.Generator) -> None:
    """Prefill (plain, and after cached prefixes longer than the window) then decode steps,
    with the blocks wholly before each step's window freed (-1) as the block manager frees
    them; both backends see the same tables."""
    cached, new = [0, 21, 8, 30], [11, 1, 9, 4]
    decode_steps = 3
    total = [c + n + decode_steps for c, n in zip(cached, new, strict=True)]
    pool = random_paged_kv(total, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE, torch.float32, gen)
    caches = {name: (pool.k_cache.clone(), pool.v_cache.clone()) for name in ("torch", "triton")}
    backends = {name: get_backend(name) for name in caches}
    assert backends["triton"].supports_sliding_window

    steps = [("prefill", cached, new, [max(0, c - window + 1) for c in cached])]
    context = [c + n for c, n in zip(cached, new, strict=True)]
    for _ in range(decode_steps):
        steps.append(
            ("decode", context, [1] * len(context), [max(0, c + 1 - window) for c in context])
        )
        context = [c + 1 for c in context]

    for phase, step_cached, step_new, first in steps:
        meta = _metadata(phase, pool.block_tables, step_cached, step_new)
        freed = pool.block_tables.clone()
        for i, start in enumerate(first):
            freed[i, : start // BLOCK_SIZE] = -1
        meta = dataclasses.replace(meta, block_tables=freed)
        num_tokens = sum(step_new)
        q = randn((num_tokens, NUM_HEADS, HEAD_DIM), gen, torch.float32)
        k = randn((num_tokens, NUM_KV_HEADS, HEAD_DIM), gen, torch.float32)
        v = randn((num_tokens, NUM_KV_HEADS, HEAD_DIM), gen, torch.float32)
        outs = {
            name: backends[name].forward(
                q, k, v, *caches[name], meta, HEAD_DIM**-0.5, sliding_window=window
            )
            for name in backends
        }
        assert rel_err(outs["triton"], outs["torch"].to(torch.float64)) <= 1e-5, phase
