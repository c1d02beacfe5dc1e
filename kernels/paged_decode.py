# mypy: disable-error-code="no-untyped-def, untyped-decorator"
# (@triton.jit functions take Triton tensors and constexprs, which have no useful static types.)
"""``paged_decode_attention``: one new query token per sequence against its paged KV cache.

Flash-decoding with split-KV, in two kernels:

1. ``_paged_decode_split_kernel``, grid ``(num_kv_heads, num_splits, num_seqs)``. A program loads
   the whole query group of one kv head (GQA/MQA: ``num_heads // num_kv_heads`` query heads, padded
   to 16 rows for the tensor cores), so each key/value row is read from memory once for all the
   heads that share it. It walks its slice of the sequence's tokens (``tokens_per_split``) in
   tiles of ``BLOCK_N``, looking up each token's block in the block table, with an online
   (running max) softmax. With one split it writes the final output directly; otherwise it
   writes the normalised partial output and its log-sum-exp.
2. ``_paged_decode_reduce_kernel``, grid ``(num_heads, num_seqs)``: merges the partial outputs of
   the splits that hold tokens, weighting each by ``exp2(lse - max lse)``.

With a sliding window of ``W`` tokens the query (position ``seq_len - 1``) sees the keys at
positions ``seq_len - W .. seq_len - 1`` only (transformers' Mistral semantics): each split starts
its walk at the window's first token, so blocks before it are never read (the engine frees them,
-1 in the block table), and a split wholly before the window writes a zero partial output with
log-sum-exp -inf, which the reduce weighs 0.

Splitting the sequence keeps the GPU busy when ``num_seqs * num_kv_heads`` programs alone would
leave streaming multiprocessors idle (small batches, long contexts).

Quantised caches (int8, float8 e4m3) hold codes with one float32 scale per kv head. The codes are
converted to the dot dtype exactly (both fit in bf16/fp16), and the scales are applied to the
scores (``k_scale``) and to the output (``v_scale``), which is the same math as dequantising every
element first, without the per-element multiply.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from promptcache.errors import KernelInputError

from ._checks import (
    ACTIVATION_DTYPES,
    QUANTIZED_CACHE_DTYPES,
    check_block_tables,
    check_cache_pair,
    check_device,
    check_scales,
    check_sliding_window,
    check_softmax_scale,
    check_tensor,
    is_interpreted,
    next_power_of_2,
    tl_dtype,
)
from ._jit_helpers import as_dot_operand, cast_for_store, dot, load_paged_tile, softmax_step
from .launch import DECODE_LAUNCH, LaunchConfig, check_launch

__all__ = ["MAX_SPLITS", "choose_num_splits", "paged_decode_attention"]

MAX_SPLITS = 64
"""Upper bound on splits per sequence (the reduce kernel holds all of them in one tile)."""

_LOG2E = 1.4426950408889634


@triton.jit
def _paged_decode_split_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    k_scale_ptr,
    v_scale_ptr,
    out_ptr,
    partial_out_ptr,
    partial_lse_ptr,
    qk_scale,
    tokens_per_split,
    window,
    stride_q_seq,
    stride_q_head,
    stride_kc_block,
    stride_kc_tok,
    stride_kc_head,
    stride_vc_block,
    stride_vc_tok,
    stride_vc_head,
    stride_bt_seq,
    stride_o_seq,
    stride_o_head,
    stride_po_seq,
    stride_po_head,
    stride_po_split,
    stride_pl_seq,
    stride_pl_head,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    QUERY_GROUP: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    QUANTIZED: tl.constexpr,
    SINGLE_SPLIT: tl.constexpr,
    WINDOWED: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    OUT_DTYPE: tl.constexpr,
    IEEE: tl.constexpr,
    EMULATE: tl.constexpr,
):
    kv_head = tl.program_id(0)
    split = tl.program_id(1)
    seq = tl.program_id(2).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + seq)
    start = split * tokens_per_split
    if SINGLE_SPLIT:
        end = seq_len
    else:
        end = tl.minimum(start + tokens_per_split, seq_len)
        if start >= end:
            return  # the reduce kernel only reads splits that hold tokens

    g = tl.arange(0, BLOCK_H)
    heads = kv_head * QUERY_GROUP + g
    h_mask = g < QUERY_GROUP
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    hd_mask = h_mask[:, None] & d_mask[None, :]

    q = tl.load(
        q_ptr + seq * stride_q_seq + heads[:, None] * stride_q_head + d[None, :],
        mask=hd_mask,
        other=0.0,
    ).to(tl.float32)
    q = as_dot_operand(q, DOT_DTYPE, EMULATE)
    score_scale = qk_scale
    if QUANTIZED:
        score_scale = qk_scale * tl.load(k_scale_ptr + kv_head)

    block_table_ptr = block_tables_ptr + seq * stride_bt_seq
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
    first = start
    if WINDOWED:  # keys before the window are neither read nor scored
        first = tl.maximum(start, seq_len - window)
    for tok0 in range(first, end, BLOCK_N):
        toks = tok0 + tl.arange(0, BLOCK_N)
        tok_mask = toks < end
        k = load_paged_tile(
            k_cache_ptr, block_table_ptr, toks, tok_mask, kv_head, d, d_mask,
            stride_kc_block, stride_kc_tok, stride_kc_head, BLOCK_SIZE, EMULATE,
        )  # fmt: skip
        v = load_paged_tile(
            v_cache_ptr, block_table_ptr, toks, tok_mask, kv_head, d, d_mask,
            stride_vc_block, stride_vc_tok, stride_vc_head, BLOCK_SIZE, EMULATE,
        )  # fmt: skip
        s = dot(q, tl.trans(as_dot_operand(k, DOT_DTYPE, EMULATE)), IEEE) * score_scale
        s = tl.where(tok_mask[None, :], s, float("-inf"))
        v = as_dot_operand(v, DOT_DTYPE, EMULATE)
        m_i, l_i, acc = softmax_step(s, v, m_i, l_i, acc, 1.0, DOT_DTYPE, IEEE, EMULATE)

    if QUANTIZED:
        acc = acc * tl.load(v_scale_ptr + kv_head)
    if SINGLE_SPLIT:
        out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]  # seq_len == 0 gives zeros
        out_ptrs = out_ptr + seq * stride_o_seq + heads[:, None] * stride_o_head + d[None, :]
        tl.store(out_ptrs, cast_for_store(out, OUT_DTYPE, EMULATE), mask=hd_mask)
    else:
        po_ptrs = (
            partial_out_ptr
            + seq * stride_po_seq
            + heads[:, None] * stride_po_head
            + split * stride_po_split
            + d[None, :]
        )
        seen = l_i > 0.0  # False only for a split wholly before the sliding window
        l_safe = tl.where(seen, l_i, 1.0)
        tl.store(po_ptrs, acc / l_safe[:, None], mask=hd_mask)
        pl_ptrs = partial_lse_ptr + seq * stride_pl_seq + heads * stride_pl_head + split
        tl.store(pl_ptrs, tl.where(seen, m_i + tl.log2(l_safe), float("-inf")), mask=h_mask)


@triton.jit
def _paged_decode_reduce_kernel(
    partial_out_ptr,
    partial_lse_ptr,
    seq_lens_ptr,
    out_ptr,
    tokens_per_split,
    stride_po_seq,
    stride_po_head,
    stride_po_split,
    stride_pl_seq,
    stride_pl_head,
    stride_o_seq,
    stride_o_head,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_SPLITS: tl.constexpr,
    OUT_DTYPE: tl.constexpr,
    EMULATE: tl.constexpr,
):
    head = tl.program_id(0)
    seq = tl.program_id(1).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + seq)
    num_valid = tl.cdiv(seq_len, tokens_per_split)
    s = tl.arange(0, BLOCK_SPLITS)
    s_mask = s < num_valid
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM

    lse = tl.load(
        partial_lse_ptr + seq * stride_pl_seq + head * stride_pl_head + s,
        mask=s_mask,
        other=float("-inf"),
    )
    lse_max = tl.where(num_valid > 0, tl.max(lse, 0), 0.0)
    weights = tl.where(s_mask, tl.exp2(lse - lse_max), 0.0)
    partial = tl.load(
        partial_out_ptr
        + seq * stride_po_seq
        + head * stride_po_head
        + s[:, None] * stride_po_split
        + d[None, :],
        mask=s_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    total = tl.sum(weights, 0)
    out = tl.sum(weights[:, None] * partial, 0) / tl.where(total > 0.0, total, 1.0)
    out_ptrs = out_ptr + seq * stride_o_seq + head * stride_o_head + d
    tl.store(out_ptrs, cast_for_store(out, OUT_DTYPE, EMULATE), mask=d_mask)


def choose_num_splits(
    num_seqs: int,
    num_kv_heads: int,
    max_context_tokens: int,
    num_sms: int,
    launch: LaunchConfig = DECODE_LAUNCH,
) -> int:
    """Splits per sequence so that about ``launch.programs_per_sm`` programs run per streaming
    multiprocessor.

    ``max_context_tokens`` is the longest context the block tables can address. Never more
    splits than tiles of ``launch.block_n`` tokens, nor more than :data:`MAX_SPLITS`.
    """
    num_tiles = max(1, math.ceil(max_context_tokens / launch.block_n))
    programs = launch.programs_per_sm * num_sms
    wanted = math.ceil(programs / max(1, num_seqs * num_kv_heads))
    return max(1, min(wanted, num_tiles, MAX_SPLITS))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return 132  # CPU (interpreter): decide as an H100 would, so tests see the GPU's split path


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
    num_splits: int | None = None,
    sliding_window: int | None = None,
    launch: LaunchConfig = DECODE_LAUNCH,
) -> torch.Tensor:
    """Attention of one query token per sequence over that sequence's paged KV cache.

    Args:
        q: [num_seqs, num_heads, head_dim], float32 / float16 / bfloat16; last dim contiguous.
        k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim]; the dtype of ``q``,
            or int8 / float8_e4m3fn codes with ``k_scale`` / ``v_scale``. ``num_heads`` must be
            a multiple of ``num_kv_heads`` (query head ``h`` reads kv head
            ``h // (num_heads // num_kv_heads)``).
        block_tables: [num_seqs, max_blocks] int32; row ``i`` lists the blocks of sequence ``i``
            in order, padded with -1 (padding is never read).
        seq_lens: [num_seqs] int32, tokens in the cache for each sequence, the new token's own
            key and value included (store them first with :func:`store_kv`). 0 yields zeros.
        scale: softmax scale, usually ``head_dim ** -0.5``.
        k_scale, v_scale: [num_kv_heads] float32 dequantisation scales for int8 / float8 caches.
        out: optional [num_seqs, num_heads, head_dim] output in ``q``'s dtype, written fully.
        num_splits: split-KV factor; default from :func:`choose_num_splits` for this device.
        sliding_window: if set, the query sees only the last ``sliding_window`` tokens of its
            sequence (positions ``seq_len - sliding_window .. seq_len - 1``); the blocks before
            them are not read and may be -1.
        launch: tile size, warps, pipeline stages and split target (`LaunchConfig`); the
            default is the best measured on an H200 (`promptcache.kernels.launch`).

    Returns:
        [num_seqs, num_heads, head_dim] in ``q``'s dtype (``out`` when given).

    Raises:
        KernelInputError: a shape, dtype or device does not fit (checked before launching); on
            CPU tensors, also a length beyond its block table or a block id outside the pool.
    """
    k_cache, v_cache, num_blocks, block_size, num_kv_heads, head_dim = check_cache_pair(
        k_cache, v_cache
    )
    q = check_tensor("q", q, shape=[None, None, head_dim], dtypes=ACTIVATION_DTYPES,
                     dims="[num_seqs, num_heads, head_dim]")  # fmt: skip
    num_seqs, num_heads, _ = q.shape
    if num_heads % num_kv_heads:
        raise KernelInputError(
            f"q has {num_heads} heads, not a multiple of the cache's {num_kv_heads} kv heads"
        )
    block_tables = check_tensor("block_tables", block_tables, shape=[num_seqs, None],
                                dtypes=[torch.int32], dims="[num_seqs, max_blocks]")  # fmt: skip
    seq_lens = check_tensor("seq_lens", seq_lens, shape=[num_seqs], dtypes=[torch.int32],
                            dims="[num_seqs]")  # fmt: skip
    k_scale, v_scale = check_scales(k_cache, k_scale, v_scale, num_kv_heads, q.dtype)
    scale = check_softmax_scale(scale)
    sliding_window = check_sliding_window(sliding_window)
    launch = check_launch(launch)
    if num_splits is not None and (isinstance(num_splits, bool) or not isinstance(num_splits, int)):
        raise KernelInputError(f"num_splits must be an int or None, got {num_splits!r}")
    if out is None:
        out = torch.empty_like(q)
    out = check_tensor("out", out, shape=list(q.shape), dtypes=[q.dtype],
                       dims="[num_seqs, num_heads, head_dim]")  # fmt: skip
    device = check_device(_paged_decode_split_kernel, q=q, k_cache=k_cache, v_cache=v_cache,
                          block_tables=block_tables, seq_lens=seq_lens, k_scale=k_scale,
                          v_scale=v_scale, out=out)  # fmt: skip
    first = None if sliding_window is None else (seq_lens - sliding_window).clamp(min=0)
    check_block_tables(block_tables, seq_lens, block_size, num_blocks, "seq_lens", first)
    if num_seqs == 0:
        return out

    max_context_tokens = max(1, block_tables.shape[1] * block_size)
    if num_splits is None:
        num_splits = choose_num_splits(
            num_seqs, num_kv_heads, max_context_tokens, _num_sms(device), launch
        )
    if not 1 <= num_splits <= MAX_SPLITS:
        raise KernelInputError(f"num_splits must be in 1..{MAX_SPLITS}, got {num_splits}")
    tiles_per_split = math.ceil(math.ceil(max_context_tokens / launch.block_n) / num_splits)
    tokens_per_split = tiles_per_split * launch.block_n
    num_splits = math.ceil(max_context_tokens / tokens_per_split)

    quantized = k_cache.dtype in QUANTIZED_CACHE_DTYPES
    single = num_splits == 1
    if single:
        partial_out = out  # unused by the kernel
        partial_lse = out
    else:
        partial_out = torch.empty(
            (num_seqs, num_heads, num_splits, head_dim), dtype=torch.float32, device=device
        )
        partial_lse = torch.empty((num_seqs, num_heads, num_splits), dtype=torch.float32,
                                  device=device)  # fmt: skip
    emulate = is_interpreted(_paged_decode_split_kernel)
    block_d = max(16, next_power_of_2(head_dim))
    query_group = num_heads // num_kv_heads
    _paged_decode_split_kernel[(num_kv_heads, num_splits, num_seqs)](
        q, k_cache, v_cache, block_tables, seq_lens,
        k_scale if quantized else q, v_scale if quantized else q,
        out, partial_out, partial_lse,
        scale * _LOG2E, tokens_per_split, sliding_window or 0,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_tables.stride(0),
        out.stride(0), out.stride(1),
        *(partial_out.stride()[:3] if not single else (0, 0, 0)),
        *(partial_lse.stride()[:2] if not single else (0, 0)),
        HEAD_DIM=head_dim,
        BLOCK_D=block_d,
        QUERY_GROUP=query_group,
        BLOCK_H=max(16, next_power_of_2(query_group)),
        BLOCK_N=launch.block_n,
        BLOCK_SIZE=block_size,
        QUANTIZED=quantized,
        SINGLE_SPLIT=single,
        WINDOWED=sliding_window is not None,
        DOT_DTYPE=tl_dtype(q.dtype),
        OUT_DTYPE=tl_dtype(q.dtype),
        IEEE=q.dtype == torch.float32,
        EMULATE=emulate,
        num_warps=launch.num_warps,
        num_stages=launch.num_stages,
    )  # fmt: skip
    if not single:
        _paged_decode_reduce_kernel[(num_heads, num_seqs)](
            partial_out, partial_lse, seq_lens, out, tokens_per_split,
            *partial_out.stride()[:3], *partial_lse.stride()[:2],
            out.stride(0), out.stride(1),
            HEAD_DIM=head_dim,
            BLOCK_D=block_d,
            BLOCK_SPLITS=max(2, next_power_of_2(num_splits)),
            OUT_DTYPE=tl_dtype(q.dtype),
            EMULATE=emulate,
            num_warps=4,
        )  # fmt: skip
    return out
