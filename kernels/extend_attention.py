# mypy: disable-error-code="no-untyped-def, untyped-decorator"
# (@triton.jit functions take Triton tensors and constexprs, which have no useful static types.)
"""``extend_attention``: new tokens attend to their paged prefix and causally to each other.

Used for prefill, chunked prefill and prefill after a prefix-cache hit. Sequence ``i`` has
``prefix_lens[i]`` tokens already in the paged cache and ``n_i`` new tokens, packed varlen in
``q``/``k``/``v`` at rows ``cu_seqlens_q[i] .. cu_seqlens_q[i + 1]``. New token ``j`` of sequence
``i`` attends to all ``prefix_lens[i]`` cached tokens and to new tokens ``0..j``.

Grid ``(num_heads, cdiv(max_seqlen_q, BLOCK_M), num_seqs)``: a program owns ``BLOCK_M`` query rows
of one head of one sequence. Heads vary fastest, so the programs that share a kv head run side
by side and hit the same K/V in L2. Phase 1 walks the prefix through the block table (quantised
caches are dequantised through their per-head scale); phase 2 walks the new keys and values
straight from ``k`` and ``v`` (unquantised), up to the tile's diagonal. One online softmax covers
both phases.

With a sliding window of ``W`` tokens, the token at position ``p`` sees keys ``p - W < t <= p``
only (transformers' Mistral semantics): both phases start at the first key the tile's first row
sees and mask the rest per row, so the prefix blocks before that key are never read (the engine
frees them, -1 in the block table).
"""

from __future__ import annotations

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
from ._jit_helpers import (
    as_dot_operand,
    cast_for_store,
    dot,
    load_paged_tile,
    softmax_step,
    widen_if_emulated,
)
from .launch import EXTEND_LAUNCH, LaunchConfig, check_launch

__all__ = ["extend_attention"]

_LOG2E = 1.4426950408889634


@triton.jit
def _extend_attention_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    cu_seqlens_q_ptr,
    prefix_lens_ptr,
    k_scale_ptr,
    v_scale_ptr,
    out_ptr,
    qk_scale,
    window,
    stride_q_tok,
    stride_q_head,
    stride_k_tok,
    stride_k_head,
    stride_v_tok,
    stride_v_head,
    stride_kc_block,
    stride_kc_tok,
    stride_kc_head,
    stride_vc_block,
    stride_vc_tok,
    stride_vc_head,
    stride_bt_seq,
    stride_o_tok,
    stride_o_head,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    QUERY_GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    QUANTIZED: tl.constexpr,
    WINDOWED: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    OUT_DTYPE: tl.constexpr,
    IEEE: tl.constexpr,
    EMULATE: tl.constexpr,
):
    head = tl.program_id(0)
    row0 = tl.program_id(1) * BLOCK_M
    seq = tl.program_id(2).to(tl.int64)
    q_start = tl.load(cu_seqlens_q_ptr + seq)
    num_new = tl.load(cu_seqlens_q_ptr + seq + 1) - q_start
    if row0 >= num_new:
        return
    prefix_len = tl.load(prefix_lens_ptr + seq)
    kv_head = head // QUERY_GROUP

    rows = row0 + tl.arange(0, BLOCK_M)
    row_mask = rows < num_new
    q_rows = (q_start + rows).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    q = tl.load(
        q_ptr + q_rows[:, None] * stride_q_tok + head * stride_q_head + d[None, :],
        mask=row_mask[:, None] & d_mask[None, :],
        other=0.0,
    ).to(tl.float32)
    q = as_dot_operand(q, DOT_DTYPE, EMULATE)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    # Phase 1: the cached prefix, through the block table; every new token sees all of it (with
    # a window: from the first key the tile's first row sees, masked per row).
    prefix_score_scale = qk_scale
    v_mult = 1.0
    if QUANTIZED:
        prefix_score_scale = qk_scale * tl.load(k_scale_ptr + kv_head)
        v_mult = tl.load(v_scale_ptr + kv_head)
    block_table_ptr = block_tables_ptr + seq * stride_bt_seq
    first = 0
    if WINDOWED:
        first = tl.maximum(prefix_len + row0 - window + 1, 0)
    for tok0 in range(first, prefix_len, BLOCK_N):
        toks = tok0 + tl.arange(0, BLOCK_N)
        tok_mask = toks < prefix_len
        k = load_paged_tile(
            k_cache_ptr, block_table_ptr, toks, tok_mask, kv_head, d, d_mask,
            stride_kc_block, stride_kc_tok, stride_kc_head, BLOCK_SIZE, EMULATE,
        )  # fmt: skip
        v = load_paged_tile(
            v_cache_ptr, block_table_ptr, toks, tok_mask, kv_head, d, d_mask,
            stride_vc_block, stride_vc_tok, stride_vc_head, BLOCK_SIZE, EMULATE,
        )  # fmt: skip
        s = dot(q, tl.trans(as_dot_operand(k, DOT_DTYPE, EMULATE)), IEEE) * prefix_score_scale
        visible = tok_mask[None, :]
        if WINDOWED:
            visible = visible & (toks[None, :] > (prefix_len + rows)[:, None] - window)
        s = tl.where(visible, s, float("-inf"))
        v = as_dot_operand(v, DOT_DTYPE, EMULATE)
        m_i, l_i, acc = softmax_step(s, v, m_i, l_i, acc, v_mult, DOT_DTYPE, IEEE, EMULATE)

    # Phase 2: the new tokens, causally; key tiles past this tile's last row are skipped.
    new_end = tl.minimum(num_new, row0 + BLOCK_M)
    col_first = 0
    if WINDOWED:
        col_first = tl.maximum(row0 - window + 1, 0)
    for col0 in range(col_first, new_end, BLOCK_N):
        cols = col0 + tl.arange(0, BLOCK_N)
        col_mask = cols < num_new
        kv_rows = (q_start + cols).to(tl.int64)
        kv_mask = col_mask[:, None] & d_mask[None, :]
        k = tl.load(
            k_ptr + kv_rows[:, None] * stride_k_tok + kv_head * stride_k_head + d[None, :],
            mask=kv_mask,
            other=0.0,
        )
        v = tl.load(
            v_ptr + kv_rows[:, None] * stride_v_tok + kv_head * stride_v_head + d[None, :],
            mask=kv_mask,
            other=0.0,
        )
        k = widen_if_emulated(k, EMULATE)
        v = widen_if_emulated(v, EMULATE)
        s = dot(q, tl.trans(as_dot_operand(k, DOT_DTYPE, EMULATE)), IEEE) * qk_scale
        visible = col_mask[None, :] & (cols[None, :] <= rows[:, None])
        if WINDOWED:
            visible = visible & (cols[None, :] > rows[:, None] - window)
        s = tl.where(visible, s, float("-inf"))
        v = as_dot_operand(v, DOT_DTYPE, EMULATE)
        m_i, l_i, acc = softmax_step(s, v, m_i, l_i, acc, 1.0, DOT_DTYPE, IEEE, EMULATE)

    # every real row sees at least itself (l_i > 0); a padding row past num_new may see nothing
    out = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    out_ptrs = out_ptr + q_rows[:, None] * stride_o_tok + head * stride_o_head + d[None, :]
    tl.store(
        out_ptrs, cast_for_store(out, OUT_DTYPE, EMULATE), mask=row_mask[:, None] & d_mask[None, :]
    )


def extend_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    prefix_lens: torch.Tensor,
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    *,
    max_seqlen_q: int | None = None,
    out: torch.Tensor | None = None,
    sliding_window: int | None = None,
    launch: LaunchConfig = EXTEND_LAUNCH,
) -> torch.Tensor:
    """Attention of each sequence's new tokens over its paged prefix plus, causally, themselves.

    Args:
        q: [num_new_tokens, num_heads, head_dim], float32 / float16 / bfloat16, varlen-packed.
        k, v: [num_new_tokens, num_kv_heads, head_dim] in ``q``'s dtype: the new tokens' keys and
            values, read from here (not from the cache) for the causal part.
        k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim]; ``q``'s dtype, or
            int8 / float8_e4m3fn codes with ``k_scale`` / ``v_scale``. Holds the prefixes.
        block_tables: [num_seqs, max_blocks] int32, padded with -1; only the blocks covering
            each sequence's prefix are read.
        cu_seqlens_q: [num_seqs + 1] int32; new tokens of sequence ``i`` are rows
            ``cu_seqlens_q[i] .. cu_seqlens_q[i + 1]`` (``cu_seqlens_q[0] = 0``).
        prefix_lens: [num_seqs] int32, cached tokens before the new ones (0 = plain prefill).
        scale: softmax scale, usually ``head_dim ** -0.5``.
        k_scale, v_scale: [num_kv_heads] float32 dequantisation scales for int8 / float8 caches.
        max_seqlen_q: the largest new-token count; pass it (the engine knows it) to avoid a
            device-to-host copy of ``cu_seqlens_q``.
        out: optional [num_new_tokens, num_heads, head_dim] output in ``q``'s dtype.
        sliding_window: if set, the token at position ``p`` (prefix included) sees only keys
            ``p - sliding_window < t <= p``; prefix blocks no new token sees are not read and
            may be -1.
        launch: query rows and key tokens per tile, warps and pipeline stages
            (`LaunchConfig`); the default is the best measured on an H200
            (`promptcache.kernels.launch`).

    Returns:
        [num_new_tokens, num_heads, head_dim] in ``q``'s dtype (``out`` when given).

    Raises:
        KernelInputError: a shape, dtype or device does not fit (checked before launching); on
            CPU tensors, also inconsistent ``cu_seqlens_q``, a prefix beyond its block table or a
            block id outside the pool.
    """
    k_cache, v_cache, num_blocks, block_size, num_kv_heads, head_dim = check_cache_pair(
        k_cache, v_cache
    )
    q = check_tensor("q", q, shape=[None, None, head_dim], dtypes=ACTIVATION_DTYPES,
                     dims="[num_new_tokens, num_heads, head_dim]")  # fmt: skip
    num_tokens, num_heads, _ = q.shape
    if num_heads % num_kv_heads:
        raise KernelInputError(
            f"q has {num_heads} heads, not a multiple of the cache's {num_kv_heads} kv heads"
        )
    kv_dims = "[num_new_tokens, num_kv_heads, head_dim]"
    k = check_tensor("k", k, shape=[num_tokens, num_kv_heads, head_dim], dtypes=[q.dtype],
                     dims=kv_dims)  # fmt: skip
    v = check_tensor("v", v, shape=list(k.shape), dtypes=[q.dtype], dims=kv_dims)
    block_tables = check_tensor("block_tables", block_tables, shape=[None, None],
                                dtypes=[torch.int32], dims="[num_seqs, max_blocks]")  # fmt: skip
    num_seqs = block_tables.shape[0]
    cu_seqlens_q = check_tensor("cu_seqlens_q", cu_seqlens_q, shape=[num_seqs + 1],
                                dtypes=[torch.int32], dims="[num_seqs + 1]")  # fmt: skip
    prefix_lens = check_tensor("prefix_lens", prefix_lens, shape=[num_seqs],
                               dtypes=[torch.int32], dims="[num_seqs]")  # fmt: skip
    k_scale, v_scale = check_scales(k_cache, k_scale, v_scale, num_kv_heads, q.dtype)
    scale = check_softmax_scale(scale)
    sliding_window = check_sliding_window(sliding_window)
    launch = check_launch(launch)
    if max_seqlen_q is not None and (
        isinstance(max_seqlen_q, bool) or not isinstance(max_seqlen_q, int) or max_seqlen_q < 0
    ):
        raise KernelInputError(f"max_seqlen_q must be an int >= 0 or None, got {max_seqlen_q!r}")
    if out is None:
        out = torch.empty_like(q)
    out = check_tensor("out", out, shape=list(q.shape), dtypes=[q.dtype],
                       dims="[num_new_tokens, num_heads, head_dim]")  # fmt: skip
    check_device(_extend_attention_kernel, q=q, k=k, v=v, k_cache=k_cache, v_cache=v_cache,
                 block_tables=block_tables, cu_seqlens_q=cu_seqlens_q, prefix_lens=prefix_lens,
                 k_scale=k_scale, v_scale=v_scale, out=out)  # fmt: skip
    if cu_seqlens_q.device.type == "cpu":
        counts = cu_seqlens_q[1:] - cu_seqlens_q[:-1]
        if int(cu_seqlens_q[0]) != 0 or int(cu_seqlens_q[-1]) != num_tokens or (counts < 0).any():
            raise KernelInputError(
                f"cu_seqlens_q must rise from 0 to num_new_tokens = {num_tokens}, got "
                f"{cu_seqlens_q.tolist()}"
            )
        first = None if sliding_window is None else (prefix_lens - sliding_window + 1).clamp(min=0)
        check_block_tables(block_tables, prefix_lens, block_size, num_blocks, "prefix_lens", first)
        longest = int(counts.max()) if num_seqs else 0
        if max_seqlen_q is not None and max_seqlen_q < longest:
            # The grid would not cover the longest sequence; its last rows of out stay unwritten.
            raise KernelInputError(
                f"max_seqlen_q={max_seqlen_q} is below the longest sequence's {longest} new "
                "tokens in cu_seqlens_q; pass the true maximum, or None to compute it"
            )
    if max_seqlen_q is None:
        max_seqlen_q = int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max()) if num_seqs else 0
    if num_seqs == 0 or num_tokens == 0 or max_seqlen_q <= 0:
        return out

    quantized = k_cache.dtype in QUANTIZED_CACHE_DTYPES
    query_group = num_heads // num_kv_heads
    grid = (num_heads, triton.cdiv(max_seqlen_q, launch.block_m), num_seqs)
    _extend_attention_kernel[grid](
        q, k, v, k_cache, v_cache, block_tables, cu_seqlens_q, prefix_lens,
        k_scale if quantized else q, v_scale if quantized else q, out,
        scale * _LOG2E, sliding_window or 0,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_tables.stride(0),
        out.stride(0), out.stride(1),
        HEAD_DIM=head_dim,
        BLOCK_D=max(16, next_power_of_2(head_dim)),
        QUERY_GROUP=query_group,
        BLOCK_M=launch.block_m,
        BLOCK_N=launch.block_n,
        BLOCK_SIZE=block_size,
        QUANTIZED=quantized,
        WINDOWED=sliding_window is not None,
        DOT_DTYPE=tl_dtype(q.dtype),
        OUT_DTYPE=tl_dtype(q.dtype),
        IEEE=q.dtype == torch.float32,
        EMULATE=is_interpreted(_extend_attention_kernel),
        num_warps=launch.num_warps,
        num_stages=launch.num_stages,
    )  # fmt: skip
    return out
