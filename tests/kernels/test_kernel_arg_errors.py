"""Argument mistakes the shape/dtype checks used to let through: a non-number softmax scale, a
fractional num_splits, and an understated max_seqlen_q (which left rows of ``out`` unwritten)."""

from __future__ import annotations

import pytest
import torch

from promptcache.errors import KernelInputError
from promptcache.kernels import extend_attention, paged_decode_attention

NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM, HEADS = 4, 4, 2, 16, 4


def _cache() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    shape = (NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    block_tables = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    return torch.randn(shape), torch.randn(shape), block_tables


@pytest.mark.parametrize("scale", ["0.25", torch.tensor(0.25), float("nan"), 0.0, True])
def test_decode_rejects_a_bad_scale(scale: object) -> None:
    k_cache, v_cache, block_tables = _cache()
    q = torch.randn(2, HEADS, HEAD_DIM)
    seq_lens = torch.tensor([5, 8], dtype=torch.int32)
    with pytest.raises(KernelInputError, match="scale"):
        paged_decode_attention(q, k_cache, v_cache, block_tables, seq_lens, scale)  # type: ignore[arg-type]


def test_decode_rejects_a_fractional_num_splits() -> None:
    k_cache, v_cache, block_tables = _cache()
    q = torch.randn(2, HEADS, HEAD_DIM)
    seq_lens = torch.tensor([5, 8], dtype=torch.int32)
    with pytest.raises(KernelInputError, match="num_splits"):
        paged_decode_attention(q, k_cache, v_cache, block_tables, seq_lens, 0.25, num_splits=1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("max_seqlen_q", [0, 2, -1])
def test_extend_rejects_an_understated_max_seqlen_q(max_seqlen_q: int) -> None:
    k_cache, v_cache, block_tables = _cache()
    q = torch.randn(5, HEADS, HEAD_DIM)
    k, v = torch.randn(5, KV_HEADS, HEAD_DIM), torch.randn(5, KV_HEADS, HEAD_DIM)
    cu_seqlens_q = torch.tensor([0, 2, 5], dtype=torch.int32)  # the longest sequence has 3
    prefix_lens = torch.tensor([3, 4], dtype=torch.int32)
    with pytest.raises(KernelInputError, match="max_seqlen_q"):
        extend_attention(
            q, k, v, k_cache, v_cache, block_tables, cu_seqlens_q, prefix_lens, 0.25,
            max_seqlen_q=max_seqlen_q,
        )  # fmt: skip
    with pytest.raises(KernelInputError, match="scale"):
        extend_attention(
            q, k, v, k_cache, v_cache, block_tables, cu_seqlens_q, prefix_lens, "0.25",  # type: ignore[arg-type]
        )  # fmt: skip
