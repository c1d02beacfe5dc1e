"""Plain-torch references for the Triton kernels: slow, obvious, any device, float64-capable.

Each function mirrors one kernel's contract. The attention references compute in
``compute_dtype`` (float64 by default) from the same inputs the kernel reads (quantised caches are
dequantised as ``code * scale``), so their output is the exact answer the kernel approximates.
:func:`store_kv_ref` quantises in float32 exactly as the kernel does, so the two agree bit for bit.
"""

from __future__ import annotations

import torch

__all__ = [
    "dequantize_ref",
    "extend_attention_ref",
    "gather_kv_ref",
    "paged_decode_attention_ref",
    "quantize_ref",
    "store_kv_ref",
]

_QUANT_MAX = {torch.int8: 127.0, torch.float8_e4m3fn: 448.0}


def quantize_ref(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Quantise ``x`` [..., num_kv_heads, head_dim] with per-head ``scale`` [num_kv_heads].

    ``code = round(x / scale)`` in float32 (ties to even), saturated to +-127 for int8 and +-448
    for float8_e4m3fn (which has no infinities), returned as ``dtype``.
    """
    y = x.to(torch.float32) / scale.to(torch.float32)[:, None]
    y = y.clamp(-_QUANT_MAX[dtype], _QUANT_MAX[dtype])
    if dtype == torch.int8:
        y = torch.round(y)
    return y.to(dtype)


def dequantize_ref(
    codes: torch.Tensor, scale: torch.Tensor | None, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """``codes * scale`` in ``dtype``; ``codes`` [..., num_kv_heads, head_dim], scale per head.

    With ``scale=None`` (an unquantised cache) this is just a cast to ``dtype``.
    """
    values = codes.to(dtype)
    if scale is not None:
        values = values * scale.to(dtype)[:, None]
    return values


def store_kv_ref(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> None:
    """Reference of :func:`promptcache.kernels.store_kv`: same arguments, writes in place."""
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].to(torch.int64)
    flat_shape = (-1, k_cache.shape[2], k_cache.shape[3])
    for new, cache, scale in ((k, k_cache, k_scale), (v, v_cache, v_scale)):
        values = new[keep]
        if scale is not None:
            values = quantize_ref(values, scale, cache.dtype)
        cache.view(flat_shape)[slots] = values.to(cache.dtype)


def gather_kv_ref(
    cache: torch.Tensor,
    block_table: torch.Tensor,
    num_tokens: int,
    scale: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """The first ``num_tokens`` cache rows of one sequence, dequantised to ``dtype``.

    ``cache`` [num_blocks, block_size, num_kv_heads, head_dim]; ``block_table`` [max_blocks]
    (this sequence's row of ``block_tables``). Returns [num_tokens, num_kv_heads, head_dim].
    """
    block_size = cache.shape[1]
    positions = torch.arange(num_tokens, device=cache.device)
    block_ids = block_table.to(torch.int64)[positions // block_size]
    rows = cache[block_ids, positions % block_size]
    return dequantize_ref(rows, scale, dtype)


def _attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    num_prefix: int,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Softmax attention of q [n, H, D] over k, v [num_prefix + n, KVH, D]; query i sees keys
    0 .. num_prefix + i (all of the prefix, causally the new tokens), and with a sliding window
    only those after ``num_prefix + i - sliding_window``. GQA: head h uses kv head
    h // (H // KVH)."""
    n, num_heads, _ = q.shape
    group = num_heads // k.shape[1]
    if k.shape[0] == 0:
        return torch.zeros_like(q)
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    key_pos = torch.arange(k.shape[0], device=q.device)
    query_pos = num_prefix + torch.arange(n, device=q.device)
    hidden = key_pos[None, :] > query_pos[:, None]
    if sliding_window is not None:
        hidden |= key_pos[None, :] <= query_pos[:, None] - sliding_window
    scores = scores.masked_fill(hidden[None], float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)


def paged_decode_attention_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    *,
    compute_dtype: torch.dtype = torch.float64,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Reference of :func:`promptcache.kernels.paged_decode_attention`, in ``compute_dtype``.

    Returns [num_seqs, num_heads, head_dim]; a sequence with ``seq_lens == 0`` gets zeros.
    """
    outputs = []
    for i, seq_len in enumerate(seq_lens.tolist()):
        k = gather_kv_ref(k_cache, block_tables[i], seq_len, k_scale, compute_dtype)
        v = gather_kv_ref(v_cache, block_tables[i], seq_len, v_scale, compute_dtype)
        query = q[i : i + 1].to(compute_dtype)
        outputs.append(_attention(query, k, v, scale, seq_len - 1, sliding_window))
    if not outputs:
        return q.new_zeros(q.shape, dtype=compute_dtype)
    return torch.cat(outputs)


def extend_attention_ref(
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
    compute_dtype: torch.dtype = torch.float64,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Reference of :func:`promptcache.kernels.extend_attention`, in ``compute_dtype``.

    The prefix comes from the (dequantised) cache, the new tokens' keys and values from ``k``
    and ``v`` as given (not as stored). Returns [num_new_tokens, num_heads, head_dim].
    """
    outputs = []
    cu = cu_seqlens_q.tolist()
    for i, prefix_len in enumerate(prefix_lens.tolist()):
        new = slice(cu[i], cu[i + 1])
        k_seq = torch.cat(
            [
                gather_kv_ref(k_cache, block_tables[i], prefix_len, k_scale, compute_dtype),
                k[new].to(compute_dtype),
            ]
        )
        v_seq = torch.cat(
            [
                gather_kv_ref(v_cache, block_tables[i], prefix_len, v_scale, compute_dtype),
                v[new].to(compute_dtype),
            ]
        )
        query = q[new].to(compute_dtype)
        outputs.append(_attention(query, k_seq, v_seq, scale, prefix_len, sliding_window))
    if not outputs:
        return q.new_zeros(q.shape, dtype=compute_dtype)
    return torch.cat(outputs)
