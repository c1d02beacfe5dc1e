"""Sliding-window attention in the Triton kernels against the float64 reference, under the
Triton interpreter: ``paged_decode_attention`` and ``extend_attention`` with ``sliding_window``.

The blocks no query of a sequence sees are set to -1 in the block table, as the engine frees
them, so a kernel that read one would fail its block check or read the wrong block.
"""

from __future__ import annotations

import pytest
import torch
from kernel_inputs import KERNEL_BOUND, dtype_name, poisoned, randn, random_paged_kv, rel_err

from promptcache.errors import KernelInputError
from promptcache.kernels import extend_attention, paged_decode_attention
from promptcache.kernels.reference import extend_attention_ref, paged_decode_attention_ref

F32, BF16, I8 = torch.float32, torch.bfloat16, torch.int8


def _free_before(block_tables: torch.Tensor, first: list[int], block_size: int) -> torch.Tensor:
    """``block_tables`` with every block wholly before ``first[i]`` set to -1 (freed)."""
    freed = block_tables.clone()
    for i, start in enumerate(first):
        freed[i, : start // block_size] = -1
    return freed


# (q dtype, cache dtype, num_heads, num_kv_heads, head_dim, block_size, window, num_splits)
DECODE_CASES = [
    (F32, F32, 4, 2, 16, 16, 1, 1),
    (F32, F32, 4, 4, 32, 8, 5, 4),
    (F32, F32, 8, 1, 16, 16, 16, None),
    (BF16, BF16, 8, 2, 64, 16, 37, 3),
    (F32, I8, 4, 1, 32, 16, 20, 2),
    (F32, F32, 4, 2, 16, 16, 10_000, 2),  # wider than every context: no mask at all
]


@pytest.mark.parametrize(
    "case", DECODE_CASES, ids=[f"{dtype_name(c[0])}-{dtype_name(c[1])}-w{c[6]}-s{c[7]}"
                               for c in DECODE_CASES]
)  # fmt: skip
def test_decode_sees_only_the_window(
    case: tuple[torch.dtype, torch.dtype, int, int, int, int, int, int | None],
    gen: torch.Generator,
) -> None:
    q_dtype, cache_dtype, num_heads, num_kv_heads, head_dim, block_size, window, splits = case
    lens = [1, block_size, 3 * block_size + 1, 9 * block_size + 5]
    kv = random_paged_kv(lens, num_kv_heads, head_dim, block_size, cache_dtype, gen)
    tables = _free_before(kv.block_tables, [max(0, n - window) for n in lens], block_size)
    q = randn((len(lens), num_heads, head_dim), gen, q_dtype)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    scale = head_dim**-0.5
    out = poisoned(q)

    paged_decode_attention(
        q, kv.k_cache, kv.v_cache, tables, seq_lens, scale, kv.k_scale, kv.v_scale, out=out,
        num_splits=splits, sliding_window=window,
    )  # fmt: skip

    assert not out.isnan().any()
    ref = paged_decode_attention_ref(
        q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, scale, kv.k_scale, kv.v_scale,
        sliding_window=window,
    )  # fmt: skip
    assert rel_err(out, ref) <= KERNEL_BOUND[q_dtype]
    if window < max(lens):  # the window changes the answer: it is not the full attention
        full = paged_decode_attention_ref(
            q, kv.k_cache, kv.v_cache, kv.block_tables, seq_lens, scale, kv.k_scale, kv.v_scale
        )
        assert rel_err(out, full) > 100 * KERNEL_BOUND[q_dtype]


# (q dtype, cache dtype, num_heads, num_kv_heads, head_dim, block_size, window)
EXTEND_CASES = [
    (F32, F32, 4, 2, 16, 16, 1),
    (F32, F32, 4, 4, 32, 8, 7),
    (F32, F32, 8, 1, 16, 16, 16),
    (BF16, BF16, 8, 2, 64, 16, 70),
    (F32, I8, 4, 1, 32, 16, 33),
]


@pytest.mark.parametrize(
    "case", EXTEND_CASES, ids=[f"{dtype_name(c[0])}-{dtype_name(c[1])}-w{c[6]}"
                               for c in EXTEND_CASES]
)  # fmt: skip
def test_extend_sees_only_the_window(
    case: tuple[torch.dtype, torch.dtype, int, int, int, int, int], gen: torch.Generator
) -> None:
    q_dtype, cache_dtype, num_heads, num_kv_heads, head_dim, block_size, window = case
    # plain prefill, a short chunk after a long prefix, a chunk longer than one tile of rows
    prefix_lens = [0, 5 * block_size + 3, 2 * block_size, 40]
    counts = [70, 3, 1, 130]
    total = [p + n for p, n in zip(prefix_lens, counts, strict=True)]
    kv = random_paged_kv(total, num_kv_heads, head_dim, block_size, cache_dtype, gen)
    first = [max(0, p - window + 1) for p in prefix_lens]  # what the first new token sees
    tables = _free_before(kv.block_tables, first, block_size)
    num_tokens = sum(counts)
    q = randn((num_tokens, num_heads, head_dim), gen, q_dtype)
    k = randn((num_tokens, num_kv_heads, head_dim), gen, q_dtype)
    v = randn((num_tokens, num_kv_heads, head_dim), gen, q_dtype)
    cu = torch.tensor([0, *torch.tensor(counts).cumsum(0).tolist()], dtype=torch.int32)
    prefix = torch.tensor(prefix_lens, dtype=torch.int32)
    scale = head_dim**-0.5
    out = poisoned(q)

    extend_attention(
        q, k, v, kv.k_cache, kv.v_cache, tables, cu, prefix, scale, kv.k_scale, kv.v_scale,
        max_seqlen_q=max(counts), out=out, sliding_window=window,
    )  # fmt: skip

    assert not out.isnan().any()
    args = (q, k, v, kv.k_cache, kv.v_cache, kv.block_tables, cu, prefix, scale, kv.k_scale,
            kv.v_scale)  # fmt: skip
    assert (
        rel_err(out, extend_attention_ref(*args, sliding_window=window)) <= (KERNEL_BOUND[q_dtype])
    )
    assert rel_err(out, extend_attention_ref(*args)) > 100 * KERNEL_BOUND[q_dtype]


def test_a_freed_block_inside_the_window_is_refused(gen: torch.Generator) -> None:
    kv = random_paged_kv([40], 1, 16, 16, F32, gen)
    tables = _free_before(kv.block_tables, [32], 16)  # blocks 0 and 1 freed
    q = randn((1, 1, 16), gen, F32)
    seq_lens = torch.tensor([40], dtype=torch.int32)
    paged_decode_attention(q, kv.k_cache, kv.v_cache, tables, seq_lens, 0.25, sliding_window=8)
    # a window of 9 reaches token 31, in freed block 1
    with pytest.raises(KernelInputError, match=r"block_tables\[0, 1\] = -1, but seq_lens\[0\]"):
        paged_decode_attention(q, kv.k_cache, kv.v_cache, tables, seq_lens, 0.25, sliding_window=9)


@pytest.mark.parametrize("window", [0, -3, 2.5, True])
def test_a_bad_window_is_a_kernel_input_error(window: object, gen: torch.Generator) -> None:
    kv = random_paged_kv([4], 1, 16, 16, F32, gen)
    q = randn((1, 1, 16), gen, F32)
    lens = torch.tensor([4], dtype=torch.int32)
    with pytest.raises(KernelInputError, match="sliding_window must be an int >= 1 or None"):
        paged_decode_attention(
            q, kv.k_cache, kv.v_cache, kv.block_tables, lens, 0.25,
            sliding_window=window,  # type: ignore[arg-type]
        )  # fmt: skip
