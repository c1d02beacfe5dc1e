"""Decode attention of the torch backend (``attention/torch_decode.py``) against float64 torch.

Batches whose block tables share leading blocks (a shared system prompt, a nested prefix, a run
too short to be worth sharing, forked samples that differ only in their last block), rows with
nothing shared, consecutive and scattered block ids, contexts ending exactly on a block
boundary, GQA ratios 1 / 3 / 4, int8 / fp8 pools, sliding windows and bf16 (which take the
path without the cascade). Each cascade case is also checked against the same batch with the
cascade switched off (every row gathers its whole context, the previous strategy), and its plan
is checked to hold the shared prefixes the case was built to have, so a pass cannot come from
the fallback path. End to end: a batch of tinystories requests over a prefix-cached prompt
gives transformers' greedy tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_support import hf_greedy

from promptcache.engine import LLM, SamplingParams
from promptcache.engine.attention.base import AttnMetadata
from promptcache.engine.attention.torch_decode import (
    DecodePlan,
    build_decode_plan,
    cascade_applies,
    decode_attention,
    shared_runs,
)
from promptcache.engine.attention.torch_ref import TorchAttentionBackend
from promptcache.engine.kv_quant import dequantize, quantize, scales_from_amax

BLOCK = 4
HEAD_DIM = 16
MIN_SAVED = 8  # tokens; small so that runs of a few 4-token blocks are worth sharing here

_COMMON = list(range(10, 18))  # 8 consecutive blocks = 32 tokens held by rows 0-4
#: (block table, context length) per row: rows 1-2 also share 3 scattered blocks (30, 31, 5);
#: rows 3-4 share one more block (40, 4 tokens saved: below MIN_SAVED, so not shared); row 4
#: ends exactly on a block boundary; row 5 shares nothing.
SYSTEM_PROMPT = [
    ([*_COMMON, 50, 51], 37),
    ([*_COMMON, 30, 31, 5, 60], 47),
    ([*_COMMON, 30, 31, 5, 61, 62], 50),
    ([*_COMMON, 40, 70], 37),
    ([*_COMMON, 40, 71], 40),
    ([3, 90, 7, 2, 80], 18),
]
#: Samples of one prompt: all full blocks shared, each row its own last (partial) block.
FORKED = [([20, 21, 22, 23], 15), ([20, 21, 22, 24], 15), ([20, 21, 22, 25], 13)]
#: Nothing shared: consecutive ids, scattered ids, one row a single token.
UNSHARED = [([0, 1, 2, 3, 4], 20), ([9, 6, 12, 8], 14), ([11], 1)]


def make_batch(
    rows: list[tuple[list[int], int]],
    heads: int,
    kv_heads: int,
    kv_dtype: torch.dtype = torch.float32,
    dtype: torch.dtype = torch.float32,
) -> dict:
    """A decode batch over a random pool laid out as ``rows`` say (the newest K/V not stored)."""
    gen = torch.Generator().manual_seed(heads * 7 + kv_heads + len(rows))
    num_blocks = max(b for table, _ in rows for b in table) + 2
    shape = (num_blocks, BLOCK, kv_heads, HEAD_DIM)
    k_pool, v_pool = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    new_k = torch.randn(len(rows), kv_heads, HEAD_DIM, generator=gen)
    new_v = torch.randn(len(rows), kv_heads, HEAD_DIM, generator=gen)
    k_scale = v_scale = None
    if kv_dtype in (torch.int8, torch.float8_e4m3fn):
        k_scale = scales_from_amax(k_pool.abs().amax(dim=(0, 1, 3)), kv_dtype)
        v_scale = scales_from_amax(v_pool.abs().amax(dim=(0, 1, 3)), kv_dtype)
        k_cache, v_cache = quantize(k_pool, k_scale, kv_dtype), quantize(v_pool, v_scale, kv_dtype)
    else:
        k_cache, v_cache = k_pool.to(kv_dtype), v_pool.to(kv_dtype)
    width = max(len(table) for table, _ in rows)
    lens = [n for _, n in rows]
    meta = AttnMetadata(
        phase="decode",
        slot_mapping=torch.tensor(
            [table[(n - 1) // BLOCK] * BLOCK + (n - 1) % BLOCK for table, n in rows]
        ),
        block_tables=torch.tensor(
            [table + [-1] * (width - len(table)) for table, _ in rows], dtype=torch.int32
        ),
        context_lens=torch.tensor(lens, dtype=torch.int32),
        cu_seqlens_q=torch.arange(len(rows) + 1, dtype=torch.int32),
        num_computed_tokens=torch.tensor([n - 1 for n in lens], dtype=torch.int32),
        max_seqlen_q=1,
        max_seqlen_k=max(lens),
    )
    q = torch.randn(len(rows), heads, HEAD_DIM, generator=gen).to(dtype)
    return {
        "q": q,
        "k": new_k.to(dtype),
        "v": new_v.to(dtype),
        "k_cache": k_cache,
        "v_cache": v_cache,
        "meta": meta,
        "scale": HEAD_DIM**-0.5,
        "k_scale": k_scale,
        "v_scale": v_scale,
    }


def reference(batch: dict, rows: list[tuple[list[int], int]], window: int | None) -> torch.Tensor:
    """float64 attention of each row's query over its context, read through its table."""
    k_cache, v_cache = batch["k_cache"], batch["v_cache"]
    if batch["k_scale"] is not None:
        k_cache = dequantize(k_cache, batch["k_scale"], torch.float64)
        v_cache = dequantize(v_cache, batch["v_scale"], torch.float64)
    group = batch["q"].shape[1] // k_cache.shape[2]
    out = []
    for i, (table, n) in enumerate(rows):
        keys = k_cache.double()[table].flatten(0, 1)[:n].repeat_interleave(group, dim=1)
        values = v_cache.double()[table].flatten(0, 1)[:n].repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,khd->hk", batch["q"][i].double(), keys) * batch["scale"]
        if window is not None:
            scores[:, : max(n - window, 0)] = float("-inf")
        out.append(torch.einsum("hk,khd->hd", scores.softmax(-1), values))
    return torch.stack(out)


def backend() -> TorchAttentionBackend:
    attention = TorchAttentionBackend()
    attention.CASCADE_MIN_SAVED_TOKENS = MIN_SAVED
    return attention


def run(batch: dict, window: int | None = None) -> torch.Tensor:
    """The backend's decode forward (stores the newest K/V, then attends)."""
    return backend().forward(sliding_window=window, **batch)


def plan_for(batch: dict, cascade: bool, window: int | None = None) -> DecodePlan:
    b = TorchAttentionBackend
    return build_decode_plan(
        batch["meta"], window, BLOCK, cascade, b.BUCKET_RATIO, b.BUCKET_SLACK, MIN_SAVED
    )


def without_cascade(batch: dict) -> torch.Tensor:
    """The same attention with every row gathering its whole context (run after ``run``)."""
    quantized = batch["k_scale"] is not None
    return decode_attention(
        batch["q"],
        batch["k_cache"],
        batch["v_cache"],
        plan_for(batch, cascade=False),
        batch["scale"],
        batch["k_scale"] if quantized else None,
        batch["v_scale"] if quantized else None,
    )


def shared_layout(plan: DecodePlan) -> list[tuple[list[int], list[int]]]:
    return [(s.rows.tolist(), s.blocks.tolist()) for s in plan.shared]


def test_radix_walk_finds_nested_and_short_runs() -> None:
    tables = [t for t, _ in SYSTEM_PROMPT]
    caps = [(n - 1) // BLOCK for _, n in SYSTEM_PROMPT]
    runs = shared_runs(tables, caps)
    assert sorted(runs) == [([0, 1, 2, 3, 4], 0, 8), ([1, 2], 8, 11), ([3, 4], 8, 9)]
    # Caps stop a run before the block that holds a row's newest token.
    assert shared_runs([[1, 2, 3], [1, 2, 4]], [2, 1]) == [([0, 1], 0, 1)]
    assert shared_runs([[1, 2], [3, 2]], [1, 1]) == []


def test_plan_keeps_only_runs_worth_sharing() -> None:
    batch = make_batch(SYSTEM_PROMPT, 6, 2)
    plan = plan_for(batch, cascade=True)
    assert shared_layout(plan) == [([0, 1, 2, 3, 4], _COMMON), ([1, 2], [30, 31, 5])]
    assert sorted(r for bucket in plan.buckets for r in bucket.rows.tolist()) == list(range(6))
    assert plan_for(batch, cascade=False).shared == []
    assert plan_for(make_batch(UNSHARED, 6, 2), cascade=True).shared == []


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (6, 2), (8, 2), (9, 3)])
@pytest.mark.parametrize("rows", [SYSTEM_PROMPT, FORKED, UNSHARED], ids=["system", "fork", "none"])
def test_decode_matches_float64(
    rows: list[tuple[list[int], int]], heads: int, kv_heads: int
) -> None:
    batch = make_batch(rows, heads, kv_heads)
    out = run(batch)
    torch.testing.assert_close(out.double(), reference(batch, rows, None), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, without_cascade(batch), rtol=1e-6, atol=1e-6)
    if rows is not UNSHARED:
        assert plan_for(batch, cascade=True).shared


@pytest.mark.parametrize("kv_dtype", [torch.int8, torch.float8_e4m3fn])
def test_quantised_pools(kv_dtype: torch.dtype) -> None:
    """The shared prefix is dequantised once; the result equals attention over the dequantised
    pool (the quantisation error itself is test_torch_attention's business)."""
    batch = make_batch(SYSTEM_PROMPT, 6, 2, kv_dtype=kv_dtype)
    out = run(batch)
    torch.testing.assert_close(
        out.double(), reference(batch, SYSTEM_PROMPT, None), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(out, without_cascade(batch), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("window", [3, 9, 40])
def test_sliding_window_takes_the_whole_context_path(window: int) -> None:
    batch = make_batch(SYSTEM_PROMPT, 6, 2)
    assert not cascade_applies(batch["q"], window)
    assert plan_for(batch, cascade=False, window=window).shared == []
    out = run(batch, window)
    torch.testing.assert_close(
        out.double(), reference(batch, SYSTEM_PROMPT, window), rtol=1e-5, atol=1e-5
    )


def test_bf16_takes_the_whole_context_path() -> None:
    batch = make_batch(SYSTEM_PROMPT, 6, 2, kv_dtype=torch.bfloat16, dtype=torch.bfloat16)
    assert not cascade_applies(batch["q"], None)
    out = run(batch)
    torch.testing.assert_close(
        out.double(), reference(batch, SYSTEM_PROMPT, None), rtol=2e-2, atol=2e-2
    )


def test_batch_over_a_cached_prompt_matches_hf(tinystories_dir: Path) -> None:
    """Six requests share a 130-token prompt (prefix-cache hits) and continue it differently:
    their decode steps attend to the shared blocks once (the backend's default threshold: 5 x
    128 tokens saved) and give transformers' greedy tokens."""
    llm = LLM(tinystories_dir, dtype="float32", block_size=16)
    prompt = llm.tokenizer.encode(
        "Lily and Tom went to the park. They saw a big tree with red apples. " * 12
    )[:130]
    assert len(prompt) == 130
    endings = ["Tom said", "Lily was", "The dog", "Then they", "A bird", "Mom called"]
    ids = [prompt + llm.tokenizer.encode(" " + e, add_special_tokens=False) for e in endings]
    params = SamplingParams(temperature=0.0, max_tokens=12)
    llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=1))  # cache the prompt
    outs = llm.generate(ids, params)
    assert [o.num_cached_tokens for o in outs] == [128] * len(ids)
    assert [o.output_token_ids for o in outs] == hf_greedy(tinystories_dir, ids, 12)
