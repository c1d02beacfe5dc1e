"""The reference attention backend in plain torch: runs anywhere, defines what is correct.

``forward`` stores the new keys/values at their slots (quantising for int8 / fp8 pools), gathers
each sequence's whole context back from the pool through its block table, and calls
``torch.nn.functional.scaled_dot_product_attention`` with a mask that lets new token ``j`` of a
sequence with ``c`` cached tokens see keys ``0 .. c + j`` (optionally only the last
``sliding_window`` of them). A decode batch is gathered into one padded tensor and attended in a
single SDPA call; a prefill batch loops over its sequences (their query lengths differ).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..kv_quant import dequantize, is_quantized, quantize
from .base import AttentionBackend, AttnMetadata

__all__ = ["TorchAttentionBackend", "gather_kv", "store_kv"]


def store_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> None:
    """Write ``k``, ``v`` ``[num_tokens, num_kv_heads, head_dim]`` into their slots in place.

    Slots of -1 are skipped. For an int8 / fp8 pool, ``k_scale`` / ``v_scale`` ``[num_kv_heads]``
    are required and the values are quantised on the way in.
    """
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    if slots.numel() == 0:
        return
    k, v = k[keep], v[keep]
    num_kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    flat_k = k_cache.view(-1, num_kv_heads, head_dim)
    flat_v = v_cache.view(-1, num_kv_heads, head_dim)
    if is_quantized(k_cache.dtype):
        if k_scale is None or v_scale is None:
            raise ValueError("a quantised KV cache needs k_scale and v_scale")
        flat_k[slots] = quantize(k, k_scale, k_cache.dtype)
        flat_v[slots] = quantize(v, v_scale, v_cache.dtype)
    else:
        flat_k[slots] = k.to(k_cache.dtype)
        flat_v[slots] = v.to(v_cache.dtype)


def gather_kv(
    cache: torch.Tensor,
    block_table: torch.Tensor,
    num_tokens: int,
    out_dtype: torch.dtype,
    scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Read the first ``num_tokens`` positions of one sequence back from the pool.

    Args:
        cache: ``[num_blocks, block_size, num_kv_heads, head_dim]``.
        block_table: ``[>= ceil(num_tokens / block_size)]`` block ids (a -1 pad is never read).
        num_tokens: context length in tokens.
        out_dtype: dtype of the result (dequantised with ``scale`` if the pool is quantised).

    Returns:
        ``[num_tokens, num_kv_heads, head_dim]``.
    """
    block_size = cache.shape[1]
    num_blocks = -(-num_tokens // block_size)
    blocks = block_table[:num_blocks].long()
    kv = cache[blocks].flatten(0, 1)[:num_tokens]
    if scale is not None and is_quantized(cache.dtype):
        return dequantize(kv, scale, out_dtype)
    return kv.to(out_dtype)


def _allowed(q_pos: torch.Tensor, k_pos: torch.Tensor, sliding_window: int | None) -> torch.Tensor:
    """Boolean mask ``[..., len(q), len(k)]``: key position <= query position, inside the window."""
    mask = k_pos.unsqueeze(-2) <= q_pos.unsqueeze(-1)
    if sliding_window is not None:
        mask &= k_pos.unsqueeze(-2) > q_pos.unsqueeze(-1) - sliding_window
    return mask


class TorchAttentionBackend(AttentionBackend):
    """Gather-by-block-table + SDPA. Supports every pool dtype and sliding windows."""

    name = "torch"
    supports_sliding_window = True

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttnMetadata,
        scale: float,
        k_scale: torch.Tensor | None = None,
        v_scale: torch.Tensor | None = None,
        sliding_window: int | None = None,
    ) -> torch.Tensor:
        """See ``AttentionBackend.forward``."""
        store_kv(k, v, k_cache, v_cache, meta.slot_mapping, k_scale, v_scale)
        if meta.is_decode:
            return self._decode(q, k_cache, v_cache, meta, scale, k_scale, v_scale, sliding_window)
        out = torch.empty_like(q)
        cu = meta.cu_seqlens_q.tolist()
        cached = meta.num_cached_tokens.tolist()
        for i in range(meta.num_seqs):
            start, end = cu[i], cu[i + 1]
            if start == end:
                continue
            ctx_len = cached[i] + (end - start)
            keys = gather_kv(k_cache, meta.block_tables[i], ctx_len, q.dtype, k_scale)
            values = gather_kv(v_cache, meta.block_tables[i], ctx_len, q.dtype, v_scale)
            q_pos = torch.arange(cached[i], ctx_len, device=q.device)
            k_pos = torch.arange(ctx_len, device=q.device)
            mask = _allowed(q_pos, k_pos, sliding_window)
            o = F.scaled_dot_product_attention(
                q[start:end].transpose(0, 1),  # [num_heads, n, head_dim]
                keys.transpose(0, 1),  # [num_kv_heads, ctx_len, head_dim]
                values.transpose(0, 1),
                attn_mask=mask,
                scale=scale,
                enable_gqa=True,
            )
            out[start:end] = o.transpose(0, 1)
        return out

    def _decode(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttnMetadata,
        scale: float,
        k_scale: torch.Tensor | None,
        v_scale: torch.Tensor | None,
        sliding_window: int | None,
    ) -> torch.Tensor:
        """One query per sequence: pad every context to ``max_seqlen_k`` and mask the padding."""
        block_size = k_cache.shape[1]
        max_len = meta.max_seqlen_k
        num_blocks = -(-max_len // block_size)
        tables = meta.block_tables[:, :num_blocks].long().clamp(min=0)  # pads read block 0, masked
        keys = k_cache[tables].flatten(1, 2)[:, :max_len]  # [num_seqs, max_len, kv_heads, hd]
        values = v_cache[tables].flatten(1, 2)[:, :max_len]
        if k_scale is not None and v_scale is not None and is_quantized(k_cache.dtype):
            keys = dequantize(keys, k_scale, q.dtype)
            values = dequantize(values, v_scale, q.dtype)
        else:
            keys, values = keys.to(q.dtype), values.to(q.dtype)
        k_pos = torch.arange(max_len, device=q.device)
        q_pos = (meta.context_lens.long() - 1).unsqueeze(-1)  # [num_seqs, 1]
        mask = _allowed(q_pos, k_pos.expand(q_pos.shape[0], -1), sliding_window)
        o = F.scaled_dot_product_attention(
            q.unsqueeze(2),  # [num_seqs, num_heads, 1, head_dim]
            keys.transpose(1, 2),  # [num_seqs, kv_heads, max_len, head_dim]
            values.transpose(1, 2),
            attn_mask=mask.unsqueeze(1),  # [num_seqs, 1, 1, max_len]
            scale=scale,
            enable_gqa=True,
        )
        return o.squeeze(2)
