"""Every launch configuration computes the same attention: tile sizes, warps, stages and the
split target change speed only. Checked against the float64 reference under the interpreter,
with key tiles smaller and larger than the cache blocks, query tiles smaller and larger than the
new-token runs (so the unmasked tiles below the diagonal, the masked diagonal tiles and a prefix
that ends inside a tile all occur), sliding windows included."""

from __future__ import annotations

import itertools

import pytest
import torch
from kernel_inputs import KERNEL_BOUND, poisoned, randn, random_paged_kv, rel_err

from promptcache.errors import KernelInputError
from promptcache.kernels import LaunchConfig, extend_attention, paged_decode_attention
from promptcache.kernels.launch import DECODE_LAUNCH
from promptcache.kernels.paged_decode import MAX_SPLITS, choose_num_splits
from promptcache.kernels.reference import extend_attention_ref, paged_decode_attention_ref

BF16, F32 = torch.bfloat16, torch.float32
LAUNCHES = [
    LaunchConfig(block_n=16, num_warps=4, num_stages=2, block_m=16, programs_per_sm=1),
    LaunchConfig(block_n=32, num_warps=8, num_stages=3, block_m=128, programs_per_sm=8),
    LaunchConfig(block_n=128, num_warps=4, num_stages=1, block_m=32, programs_per_sm=64),
]


@pytest.mark.parametrize(
    ("launch", "window"),
    list(itertools.product(LAUNCHES, [None, 23])),
    ids=lambda x: f"bn{x.block_n}-bm{x.block_m}" if isinstance(x, LaunchConfig) else f"w{x}",
)
def test_extend_matches_the_reference_for_any_launch(
    launch: LaunchConfig, window: int | None, gen: torch.Generator
) -> None:
    block_size, kvh, heads, dim = 8, 2, 4, 32
    prefix_lens, counts = [0, 37, 16, 5], [70, 9, 40, 1]
    totals = [p + n for p, n in zip(prefix_lens, counts, strict=True)]
    kv = random_paged_kv(totals, kvh, dim, block_size, BF16, gen)
    n = sum(counts)
    q, k, v = (randn((n, h, dim), gen, BF16) for h in (heads, kvh, kvh))
    cu = torch.tensor([0, *itertools.accumulate(counts)], dtype=torch.int32)
    prefix = torch.tensor(prefix_lens, dtype=torch.int32)
    args = (q, k, v, kv.k_cache, kv.v_cache, kv.block_tables, cu, prefix, dim**-0.5)
    out = poisoned(q)

    extend_attention(*args, max_seqlen_q=max(counts), out=out, sliding_window=window,
                     launch=launch)  # fmt: skip

    assert not out.isnan().any()
    err = rel_err(out, extend_attention_ref(*args, sliding_window=window))
    assert err <= KERNEL_BOUND[BF16], f"rel_err {err:.3e}"


@pytest.mark.parametrize("cache_dtype", [BF16, torch.float8_e4m3fn])
@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda x: f"bn{x.block_n}-ppsm{x.programs_per_sm}")
def test_decode_matches_the_reference_for_any_launch(
    launch: LaunchConfig, cache_dtype: torch.dtype, gen: torch.Generator
) -> None:
    lens = [1, 15, 16, 17, 300]
    kv = random_paged_kv(lens, 2, 32, 16, cache_dtype, gen)
    q = randn((len(lens), 8, 32), gen, BF16)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, 32**-0.5, kv.k_scale,
            kv.v_scale)  # fmt: skip
    out = poisoned(q)

    paged_decode_attention(*args, out=out, launch=launch)

    assert not out.isnan().any()
    err = rel_err(out, paged_decode_attention_ref(*args))
    assert err <= KERNEL_BOUND[BF16], f"rel_err {err:.3e}"


def test_choose_num_splits_aims_at_the_launchs_programs_per_sm() -> None:
    two = LaunchConfig(block_n=64, num_warps=4, num_stages=2, programs_per_sm=2)
    # batch 1, 8 kv heads, 128k tokens on 132 SMs: 264 programs wanted -> 33 splits
    assert choose_num_splits(1, 8, 128 * 1024, 132, two) == 33
    # the default launch: batch 4 x 8 kv heads = 32 programs per split
    per_sm = DECODE_LAUNCH.programs_per_sm
    assert choose_num_splits(4, 8, 128 * 1024, 132) == min(MAX_SPLITS, -(-per_sm * 132 // 32))
    # a full batch needs no split
    assert choose_num_splits(2048, 8, 4096, 132) == 1
    # a short context cannot split beyond its tiles: 100 tokens are 2 tiles of 64, 1 of 128
    assert choose_num_splits(1, 1, 100, 132, two) == 2
    wide = LaunchConfig(block_n=128, num_warps=4, num_stages=2, programs_per_sm=2)
    assert choose_num_splits(1, 1, 100, 132, wide) == 1
    assert choose_num_splits(1, 1, 10**7, 10**4) == MAX_SPLITS


@pytest.mark.parametrize(
    ("launch", "message"),
    [
        ("fast", "launch must be a LaunchConfig"),
        (LaunchConfig(block_n=48, num_warps=4, num_stages=2), "launch.block_n must be a power"),
        (LaunchConfig(block_n=64, num_warps=4, num_stages=2, block_m=512), "launch.block_m"),
        (LaunchConfig(block_n=64, num_warps=3, num_stages=2), "launch.num_warps must be one of"),
        (LaunchConfig(block_n=64, num_warps=4, num_stages=0), "launch.num_stages must be"),
        (LaunchConfig(block_n=64, num_warps=4, num_stages=2, programs_per_sm=True),
         "launch.programs_per_sm must be"),
    ],
)
def test_a_bad_launch_is_refused_before_the_kernel_runs(
    launch: object, message: str, gen: torch.Generator
) -> None:
    kv = random_paged_kv([5], 1, 16, 16, F32, gen)
    q = randn((1, 2, 16), gen, F32)
    seq_lens = torch.tensor([5], dtype=torch.int32)
    with pytest.raises(KernelInputError, match=message):
        paged_decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, 0.25,
                               launch=launch)  # type: ignore[arg-type]  # fmt: skip
    cu = torch.tensor([0, 1], dtype=torch.int32)
    with pytest.raises(KernelInputError, match=message):
        extend_attention(q, q[:, :1], q[:, :1], kv.k_cache, kv.v_cache, kv.block_tables, cu,
                         torch.tensor([4], dtype=torch.int32), 0.25,
                         launch=launch)  # type: ignore[arg-type]  # fmt: skip

