"""extend_attention against the float64 reference, under the Triton interpreter."""

from __future__ import annotations

import itertools

import pytest
import torch
from kernel_inputs import (
    FULL_GRID,
    KERNEL_BOUND,
    dtype_name,
    poisoned,
    randn,
    random_paged_kv,
    rel_err,
)

from promptcache.errors import KernelInputError
from promptcache.kernels import extend_attention, store_kv
from promptcache.kernels.reference import extend_attention_ref

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
I8, FP8 = torch.int8, torch.float8_e4m3fn

# (q dtype, cache dtype, num_heads, num_kv_heads, head_dim, block_size)
SMOKE_CASES = [
    (F32, F32, 4, 2, 16, 16),
    (BF16, BF16, 8, 1, 64, 8),
    (F16, F16, 4, 4, 128, 16),
    (BF16, FP8, 8, 2, 64, 16),
    (F32, I8, 8, 8, 16, 32),
]
FULL_CASES = [
    (qd, cd, 8, 8 // ratio, hd, bs)
    for (qd, cd), ratio, hd, bs in itertools.product(
        [(F32, F32), (F16, F16), (BF16, BF16), (BF16, I8), (BF16, FP8)],
        [1, 2, 4, 8],
        [16, 64, 128],
        [8, 16, 32],
    )
]
CASES = FULL_CASES if FULL_GRID else SMOKE_CASES


def _lengths(block_size: int, gen: torch.Generator) -> tuple[list[int], list[int]]:
    """(prefix_lens, new-token counts): a plain prefill longer than one 64-row query tile, and
    prefixes of 1, block_size - 1, block_size, block_size + 1 and many blocks; shuffled."""
    pairs = [
        (0, 70),
        (1, 1),
        (block_size - 1, 5),
        (block_size, 17),
        (block_size + 1, 3),
        (5 * block_size + 3, 66),
    ]
    order = torch.randperm(len(pairs), generator=gen).tolist()
    return [pairs[i][0] for i in order], [pairs[i][1] for i in order]


def _cu(counts: list[int]) -> torch.Tensor:
    return torch.tensor([0, *itertools.accumulate(counts)], dtype=torch.int32)


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=lambda c: f"{dtype_name(c[0])}-{dtype_name(c[1])}-h{c[2]}kv{c[3]}-d{c[4]}-bs{c[5]}",
)
def test_matches_float64_reference(
    case: tuple[torch.dtype, torch.dtype, int, int, int, int], gen: torch.Generator
) -> None:
    q_dtype, cache_dtype, num_heads, num_kv_heads, head_dim, block_size = case
    prefix_lens, counts = _lengths(block_size, gen)
    # the pool covers prefix + new tokens, as in the engine; only the prefix is read from it
    total = [p + n for p, n in zip(prefix_lens, counts, strict=True)]
    kv = random_paged_kv(total, num_kv_heads, head_dim, block_size, cache_dtype, gen)
    num_tokens = sum(counts)
    q = randn((num_tokens, num_heads, head_dim), gen, q_dtype)
    k = randn((num_tokens, num_kv_heads, head_dim), gen, q_dtype)
    v = randn((num_tokens, num_kv_heads, head_dim), gen, q_dtype)
    cu, prefix = _cu(counts), torch.tensor(prefix_lens, dtype=torch.int32)
    args = (q, k, v, kv.k_cache, kv.v_cache, kv.block_tables, cu, prefix, head_dim**-0.5,
            kv.k_scale, kv.v_scale)  # fmt: skip
    out = poisoned(q)

    result = extend_attention(*args, max_seqlen_q=max(counts), out=out)

    assert result is out
    assert not out.isnan().any(), f"unwritten outputs at {out.isnan().nonzero()[:5].tolist()}"
    err = rel_err(out, extend_attention_ref(*args))
    assert err <= KERNEL_BOUND[q_dtype], f"rel_err {err:.3e}, prefixes {prefix_lens}, new {counts}"


def test_chunked_prefill_equals_one_prefill(gen: torch.Generator) -> None:
    """Prefill in two chunks (the first stored with store_kv) == the same prefill in one go."""
    num_heads, num_kv_heads, head_dim, block_size, prefix_len, n = 4, 2, 32, 16, 20, 90
    kv = random_paged_kv([prefix_len + n], num_kv_heads, head_dim, block_size, F32, gen)
    q = randn((n, num_heads, head_dim), gen, F32)
    k = randn((n, num_kv_heads, head_dim), gen, F32)
    v = randn((n, num_kv_heads, head_dim), gen, F32)
    table = kv.block_tables
    slots = torch.tensor(
        [int(table[0, p // block_size]) * block_size + p % block_size
         for p in range(prefix_len, prefix_len + n)]
    )  # fmt: skip
    one_prefix = torch.tensor([prefix_len], dtype=torch.int32)
    whole = extend_attention(q, k, v, kv.k_cache, kv.v_cache, table, _cu([n]), one_prefix, 0.2)
    split = 37
    first, rest = slice(0, split), slice(split, n)
    out_first = extend_attention(
        q[first], k[first], v[first], kv.k_cache, kv.v_cache, table, _cu([split]), one_prefix, 0.2
    )
    store_kv(k[first], v[first], kv.k_cache, kv.v_cache, slots[first])
    out_rest = extend_attention(
        q[rest], k[rest], v[rest], kv.k_cache, kv.v_cache, table, _cu([n - split]),
        one_prefix + split, 0.2,
    )  # fmt: skip
    torch.testing.assert_close(torch.cat([out_first, out_rest]), whole)


def _args(gen: torch.Generator) -> dict[str, object]:
    kv = random_paged_kv([10, 4], 2, 16, 8, F32, gen)
    return {
        "q": randn((7, 4, 16), gen, F32),
        "k": randn((7, 2, 16), gen, F32),
        "v": randn((7, 2, 16), gen, F32),
        "k_cache": kv.k_cache,
        "v_cache": kv.v_cache,
        "block_tables": kv.block_tables,
        "cu_seqlens_q": _cu([4, 3]),
        "prefix_lens": torch.tensor([6, 1], dtype=torch.int32),
        "scale": 0.25,
    }


BAD_INPUTS = [
    ("k-dtype", lambda a: {"k": a["k"].half()}, r"k has dtype float16; expected one of: float32"),
    ("v-shape", lambda a: {"v": a["v"][:5]}, r"v must have shape"),
    ("cu-length", lambda a: {"cu_seqlens_q": _cu([7])}, r"cu_seqlens_q must have shape"),
    ("cu-total", lambda a: {"cu_seqlens_q": _cu([4, 2])}, r"from 0 to num_new_tokens = 7"),
    ("cu-order", lambda a: {"cu_seqlens_q": torch.tensor([0, 8, 7], dtype=torch.int32)},
     r"must rise from 0"),
    ("prefix-long", lambda a: {"prefix_lens": torch.tensor([6, 100], dtype=torch.int32)},
     r"prefix_lens must lie in"),
    ("prefix-dtype", lambda a: {"prefix_lens": torch.tensor([6, 1])}, r"prefix_lens has dtype"),
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
        extend_attention(**args)  # type: ignore[arg-type]
