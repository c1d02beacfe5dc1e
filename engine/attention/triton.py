"""The ``triton`` attention backend: the engine's GPU path, on the kernels in promptcache.kernels.

Per layer call: ``store_kv`` writes the new keys/values into the paged pool (quantising for int8 /
fp8 pools), then a decode batch runs ``paged_decode_attention`` (split-KV flash-decoding) and a
prefill batch, chunks and prefix-cache hits included, runs ``extend_attention`` (paged prefix +
causal new tokens). The kernels need CUDA tensors; on the CPU they run only under the Triton
interpreter (``TRITON_INTERPRET=1``, for tests), otherwise they raise ``KernelInputError``.

A sliding window (``p - window < t <= p``, transformers' Mistral/Qwen2 semantics) is applied
inside both kernels, which start reading at the window's first key: the blocks the block manager
freed before it (-1 in the block table) are never read.

Numerics differ from the ``torch`` backend only by rounding, with one deliberate exception: in a
prefill over a quantised pool the new tokens attend to each other with their unquantised keys and
values (as vLLM and SGLang do), while the torch backend reads them back quantised.
"""

from __future__ import annotations

import torch

from promptcache.kernels import extend_attention, paged_decode_attention, store_kv

from .base import AttentionBackend, AttnMetadata

__all__ = ["TritonAttentionBackend"]


class TritonAttentionBackend(AttentionBackend):
    """Paged attention on Triton kernels; every pool dtype, GQA/MQA, sliding windows."""

    name = "triton"
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
        """See ``AttentionBackend.forward``.

        Raises:
            KernelInputError: a tensor's shape, dtype or device does not fit the kernels.
        """
        store_kv(k, v, k_cache, v_cache, meta.slot_mapping, k_scale, v_scale)
        if meta.is_decode:
            out: torch.Tensor = paged_decode_attention(
                q, k_cache, v_cache, meta.block_tables, meta.context_lens, scale, k_scale, v_scale,
                sliding_window=sliding_window,
            )  # fmt: skip
            return out
        out = extend_attention(
            q,
            k,
            v,
            k_cache,
            v_cache,
            meta.block_tables,
            meta.cu_seqlens_q,
            meta.num_computed_tokens,
            scale,
            k_scale,
            v_scale,
            max_seqlen_q=meta.max_seqlen_q,
            sliding_window=sliding_window,
        )
        return out
