"""The attention-backend contract: what the model runner hands to attention, and what it returns.

One ``AttnMetadata`` describes a whole scheduled batch; every layer reuses it. The field names are
the kernels' names (``slot_mapping``, ``block_tables``, ``cu_seqlens_q``, ``context_lens``,
``num_computed_tokens``) so nothing is renamed between the scheduler and a kernel.

Token layout: the new tokens of all sequences are packed back to back (varlen, no padding);
sequence ``i`` owns rows ``cu_seqlens_q[i]:cu_seqlens_q[i + 1]``. Its KV history lives in the
paged pool at the blocks listed in ``block_tables[i]``; slot ``s`` is row ``s % block_size`` of
block ``s // block_size``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

import torch

__all__ = ["AttentionBackend", "AttnMetadata", "KVCacheLayer"]


@dataclass
class AttnMetadata:
    """Where the new tokens of one batch go in the KV pool and what they attend to.

    Attributes:
        phase: "decode" when every sequence has exactly one new token and a KV history;
            otherwise "prefill" (a prefill over a cached prefix, or a chunk, is still "prefill").
        slot_mapping: ``[num_new_tokens]`` int64, ``block_id * block_size + offset`` where each
            new token's K/V is stored; -1 = do not store.
        block_tables: ``[num_seqs, max_num_blocks]`` int32, each row a sequence's block ids in
            order, padded with -1.
        context_lens: ``[num_seqs]`` int32, cached + new tokens of each sequence after this step.
        cu_seqlens_q: ``[num_seqs + 1]`` int32, cumulative new-token counts (starts at 0).
        num_computed_tokens: ``[num_seqs]`` int32, tokens already in the pool before this step
            (= context_lens - new tokens).
        max_seqlen_q: the largest new-token count of one sequence.
        max_seqlen_k: the largest context_len.
    """

    phase: Literal["prefill", "decode"]
    slot_mapping: torch.Tensor
    block_tables: torch.Tensor
    context_lens: torch.Tensor
    cu_seqlens_q: torch.Tensor
    num_computed_tokens: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int

    @property
    def is_prefill(self) -> bool:
        """True for a prefill (including chunks and prefills over a cached prefix)."""
        return self.phase == "prefill"

    @property
    def is_decode(self) -> bool:
        """True when every sequence brings exactly one new token."""
        return self.phase == "decode"

    @property
    def num_seqs(self) -> int:
        """Sequences in the batch."""
        return int(self.context_lens.shape[0])


@dataclass
class KVCacheLayer:
    """One layer's slice of the paged KV pool.

    Attributes:
        k_cache, v_cache: ``[num_blocks, block_size, num_kv_heads, head_dim]``, dtype fp32 / fp16
            / bf16, or int8 / float8_e4m3fn when quantised.
        k_scale, v_scale: ``[num_kv_heads]`` fp32 per-head scales for a quantised pool, else None.
    """

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    k_scale: torch.Tensor | None = None
    v_scale: torch.Tensor | None = None


class AttentionBackend(ABC):
    """Stores new keys/values in the paged pool and computes attention for the new tokens.

    Backends are stateless apart from their construction options, so one instance serves every
    layer. ``supports_sliding_window`` says whether ``forward`` honours ``sliding_window``; the
    model runner refuses a sliding-window model on a backend without it.
    """

    name: str = "abstract"
    supports_sliding_window: bool = False

    @abstractmethod
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
        """Store ``k``, ``v`` at ``meta.slot_mapping``, then attend.

        Args:
            q: ``[num_new_tokens, num_heads, head_dim]``.
            k, v: ``[num_new_tokens, num_kv_heads, head_dim]`` (keys already rotated by RoPE).
            k_cache, v_cache: one layer's pool, ``[num_blocks, block_size, num_kv_heads,
                head_dim]``; written in place.
            meta: the batch layout (see ``AttnMetadata``).
            scale: softmax scale, usually ``head_dim ** -0.5``.
            k_scale, v_scale: ``[num_kv_heads]`` fp32 scales when the pool is int8 / fp8.
            sliding_window: if set, a token at position p sees keys at positions
                ``p - sliding_window < t <= p`` only (transformers' Mistral/Qwen2 semantics).

        Returns:
            ``[num_new_tokens, num_heads, head_dim]`` in ``q``'s dtype: each new token attends to
            its sequence's paged prefix and causally to the new tokens before it.
        """
