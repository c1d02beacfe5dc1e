"""paged_decode_attention against the float64 reference, under the Triton interpreter."""

from __future__ import annotations

import itertools

import pytest
import torch
from kernel_inputs import (
    FULL_GRID,
    KERNEL_BOUND,
    QUANTIZATION_BOUND,
    QUANTIZED,
    dtype_name,
    poisoned,
    ragged_lens,
    randn,
    random_paged_kv,
    rel_err,
)

from promptcache.errors import KernelInputError
from promptcache.kernels import paged_decode_attention
from promptcache.kernels.paged_decode import MAX_SPLITS
from promptcache.kernels.reference import paged_decode_attention_ref

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
I8, FP8 = torch.int8, torch.float8_e4m3fn

# (q dtype, cache dtype, num_heads, num_kv_heads, head_dim, block_size, num_splits)
# GQA ratios 1, 2, 4, 8 (8 = MQA here), head_dim 16/64/128, every cache dtype, 1 split, a forced
# split count and the device default (None).
SMOKE_CASES = [
    (F32, F32, 4, 4, 16, 16, 1),
    (F32, F32, 8, 1, 64, 8, 3),
    (BF16, BF16, 8, 2, 128, 16, None),
    (F16, F16, 4, 2, 64, 32, 2),
    (BF16, FP8, 8, 4, 64, 16, None),
    (F16, I8, 8, 1, 16, 16, 1),
    (F32, I8, 4, 1, 128, 16, 4),
]
FULL_CASES = [
    (qd, cd, 8, 8 // ratio, hd, bs, splits)
    for (qd, cd), ratio, hd, bs, splits in itertools.product(
        [(F32, F32), (F16, F16), (BF16, BF16), (BF16, I8), (BF16, FP8), (F32, FP8)],
        [1, 2, 4, 8],
        [16, 64, 128],
        [8, 16, 32],
        [1, None],
    )
]
CASES = FULL_CASES if FULL_GRID else SMOKE_CASES


def _case_id(case: tuple[object, ...]) -> str:
    qd, cd, h, kvh, hd, bs, splits = case
    assert isinstance(qd, torch.dtype) and isinstance(cd, torch.dtype)
    return f"{dtype_name(qd)}-{dtype_name(cd)}-h{h}kv{kvh}-d{hd}-bs{bs}-splits{splits}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_matches_float64_reference(
    case: tuple[torch.dtype, torch.dtype, int, int, int, int, int | None], gen: torch.Generator
) -> None:
    q_dtype, cache_dtype, num_heads, num_kv_heads, head_dim, block_size, num_splits = case
    lens = ragged_lens(block_size, gen)
    kv = random_paged_kv(lens, num_kv_heads, head_dim, block_size, cache_dtype, gen)
    q = randn((len(lens), num_heads, head_dim), gen, q_dtype)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    scale = head_dim**-0.5
    out = poisoned(q)

    result = paged_decode_attention(
        q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, scale, kv.k_scale, kv.v_scale,
        out=out, num_splits=num_splits,
    )  # fmt: skip

    assert result is out
    assert not out.isnan().any(), f"unwritten outputs at {out.isnan().nonzero()[:5].tolist()}"
    ref = paged_decode_attention_ref(
        q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, scale, kv.k_scale, kv.v_scale
    )
    err = rel_err(out, ref)
    assert err <= KERNEL_BOUND[q_dtype], f"rel_err {err:.3e} with seq_lens {lens}"


@pytest.mark.parametrize("cache_dtype", QUANTIZED, ids=dtype_name)
def test_quantized_cache_error_against_unquantized_attention(
    cache_dtype: torch.dtype, gen: torch.Generator
) -> None:
    """End to end: attention over int8 / fp8 codes vs float64 attention over the original values."""
    lens, num_heads, num_kv_heads, head_dim, block_size = [1, 15, 16, 17, 83], 8, 2, 64, 16
    kv = random_paged_kv(lens, num_kv_heads, head_dim, block_size, cache_dtype, gen)
    q = randn((len(lens), num_heads, head_dim), gen, torch.float32)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    out = paged_decode_attention(
        q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, head_dim**-0.5, kv.k_scale,
        kv.v_scale,
    )  # fmt: skip
    exact = paged_decode_attention_ref(
        q, kv.k_values, kv.v_values, kv.block_tables, seq_lens, head_dim**-0.5
    )
    err = rel_err(out, exact)
    assert err <= QUANTIZATION_BOUND[cache_dtype], f"rel_err {err:.3e}"


def test_split_count_does_not_change_the_result(gen: torch.Generator) -> None:
    lens = [1, 200, 64, 65]
    kv = random_paged_kv(lens, 2, 32, 16, F32, gen)
    q = randn((len(lens), 4, 32), gen, F32)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    args = (q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, 32**-0.5)
    one = paged_decode_attention(*args, num_splits=1)
    for splits in (2, 4):
        torch.testing.assert_close(paged_decode_attention(*args, num_splits=splits), one)


def test_empty_sequence_gives_zeros(gen: torch.Generator) -> None:
    """Padding rows (seq_len 0, as in a padded CUDA-graph batch) are written as zeros, not NaN."""
    kv = random_paged_kv([0, 5, 0], 1, 16, 16, F32, gen)
    q = randn((3, 2, 16), gen, F32)
    seq_lens = torch.tensor([0, 5, 0], dtype=torch.int32)
    for splits in (1, 2):
        out = poisoned(q)
        paged_decode_attention(
            q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, 0.25, out=out, num_splits=splits
        )
        assert torch.equal(out[0], torch.zeros_like(out[0]))
        assert torch.equal(out[2], torch.zeros_like(out[2]))
        assert not out[1].isnan().any()


def _args(gen: torch.Generator) -> dict[str, object]:
    kv = random_paged_kv([3, 20], 2, 16, 8, F32, gen)
    return {
        "q": randn((2, 4, 16), gen, F32),
        "k_cache": kv.k_cache,
        "v_cache": kv.v_cache,
        "block_tables": kv.block_tables,
        "seq_lens": torch.tensor([3, 20], dtype=torch.int32),
        "scale": 0.25,
    }


BAD_INPUTS = [
    ("q-rank", lambda a: {"q": a["q"][0]}, r"q must have shape \[num_seqs, num_heads, head_dim\]"),
    ("q-dtype", lambda a: {"q": a["q"].double()}, r"q has dtype float64"),
    ("heads", lambda a: {"q": a["q"][:, :3]}, r"not a multiple of the cache's 2 kv heads"),
    ("cache-dtype", lambda a: {"k_cache": a["k_cache"].half(), "v_cache": a["v_cache"].half()},
     r"cache dtype float16 differs from q's float32"),
    ("v-shape", lambda a: {"v_cache": a["v_cache"][:, :4]}, r"v_cache must have shape"),
    ("table-dtype", lambda a: {"block_tables": a["block_tables"].long()},
     r"block_tables has dtype int64; expected one of: int32"),
    ("seq-too-long", lambda a: {"seq_lens": torch.tensor([3, 999], dtype=torch.int32)},
     r"seq_lens must lie in \[0, max_blocks \* block_size\]"),
    ("bad-block-id", lambda a: {"block_tables": a["block_tables"].masked_fill(
        a["block_tables"] >= 0, 10_000)}, r"valid ids are 0\.\."),
    ("length-past-its-row", lambda a: {"seq_lens": torch.tensor([17, 20], dtype=torch.int32)},
     r"block_tables\[0, 1\] = -1, but seq_lens\[0\] = 17 reads that block \(tokens 8\.\.15\)"),
    ("scales-unquantized", lambda a: {"k_scale": torch.ones(2), "v_scale": torch.ones(2)},
     r"scales apply only to int8 and float8_e4m3fn caches"),
    ("missing-scales", lambda a: {"k_cache": a["k_cache"].to(I8), "v_cache": a["v_cache"].to(I8)},
     r"pass k_scale and v_scale"),
    ("splits", lambda a: {"num_splits": MAX_SPLITS + 1}, r"num_splits must be in 1\.\.64"),
    ("strided-q", lambda a: {"q": a["q"].transpose(1, 2).contiguous().transpose(1, 2)},
     r"contiguous in its last dimension"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), [b[1:] for b in BAD_INPUTS],
                         ids=[b[0] for b in BAD_INPUTS])  # fmt: skip
def test_rejects_bad_input_with_a_clear_error(
    change: object, message: str, gen: torch.Generator
) -> None:
    args = _args(gen)
    assert callable(change)
    args.update(change(args))
    with pytest.raises(KernelInputError, match=message):
        paged_decode_attention(**args)  # type: ignore[arg-type]
