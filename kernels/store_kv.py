# mypy: disable-error-code="no-untyped-def, untyped-decorator"
# (@triton.jit functions take Triton tensors and constexprs, which have no useful static types.)
"""``store_kv``: write the new tokens' keys and values into their paged-cache slots.

One program per new token writes all its kv heads. ``slot_mapping[i] = block_id * block_size +
offset`` says where token ``i`` goes; -1 skips it (a padding token, or a token whose KV is already
cached). For int8 and float8 e4m3 caches the values are quantised on the way in with the kv head's
scale: ``code = round(x / scale)`` (ties to even), saturated to +-127 (int8) or +-448 (e4m3).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from promptcache.errors import KernelInputError

from ._checks import (
    ACTIVATION_DTYPES,
    QUANTIZED_CACHE_DTYPES,
    check_cache_pair,
    check_device,
    check_scales,
    check_tensor,
    is_interpreted,
    next_power_of_2,
    tl_dtype,
)
from ._jit_helpers import cast_for_store, quantize

__all__ = ["store_kv"]


@triton.jit
def _store_kv_kernel(
    k_ptr,
    v_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_mapping_ptr,
    k_scale_ptr,
    v_scale_ptr,
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
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    QUANTIZED: tl.constexpr,
    CACHE_DTYPE: tl.constexpr,
    EMULATE: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + tok).to(tl.int64)
    if slot < 0:
        return
    block_id = slot // BLOCK_SIZE
    offset = slot % BLOCK_SIZE
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    h_mask = h < NUM_KV_HEADS
    mask = h_mask[:, None] & (d < HEAD_DIM)[None, :]

    k = tl.load(k_ptr + tok * stride_k_tok + h[:, None] * stride_k_head + d[None, :], mask=mask)
    v = tl.load(v_ptr + tok * stride_v_tok + h[:, None] * stride_v_head + d[None, :], mask=mask)
    k = k.to(tl.float32)
    v = v.to(tl.float32)
    if QUANTIZED:
        k_scale = tl.load(k_scale_ptr + h, mask=h_mask, other=1.0)
        v_scale = tl.load(v_scale_ptr + h, mask=h_mask, other=1.0)
        k_out = quantize(k, k_scale[:, None], CACHE_DTYPE)
        v_out = quantize(v, v_scale[:, None], CACHE_DTYPE)
    else:
        k_out = cast_for_store(k, CACHE_DTYPE, EMULATE)
        v_out = cast_for_store(v, CACHE_DTYPE, EMULATE)

    k_dst = k_cache_ptr + block_id * stride_kc_block + offset * stride_kc_tok
    v_dst = v_cache_ptr + block_id * stride_vc_block + offset * stride_vc_tok
    tl.store(k_dst + h[:, None] * stride_kc_head + d[None, :], k_out, mask=mask)
    tl.store(v_dst + h[:, None] * stride_vc_head + d[None, :], v_out, mask=mask)


def store_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> None:
    """Write ``k`` and ``v`` of each new token into its cache slot, in place.

    Args:
        k, v: [num_tokens, num_kv_heads, head_dim], float32 / float16 / bfloat16 (one dtype).
            Any strides, as long as the last dimension is contiguous.
        k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim]: one layer's pool.
            float32 / float16 / bfloat16 (values are cast to it), or int8 / float8_e4m3fn
            (values are quantised with the scales).
        slot_mapping: [num_tokens] int64 or int32; ``block_id * block_size + offset``, -1 = skip.
        k_scale, v_scale: [num_kv_heads] float32 dequantisation scales (value = code * scale);
            required for int8 / float8_e4m3fn caches, must be None otherwise.

    Raises:
        KernelInputError: a shape, dtype or device does not fit (checked before launching); on
            CPU tensors, also a slot outside the pool.
    """
    k_cache, v_cache, num_blocks, block_size, num_kv_heads, head_dim = check_cache_pair(
        k_cache, v_cache
    )
    kv_dims = "[num_tokens, num_kv_heads, head_dim]"
    k = check_tensor(
        "k", k, shape=[None, num_kv_heads, head_dim], dtypes=ACTIVATION_DTYPES, dims=kv_dims
    )
    num_tokens = k.shape[0]
    v = check_tensor("v", v, shape=list(k.shape), dtypes=[k.dtype], dims=kv_dims)
    slot_mapping = check_tensor(
        "slot_mapping",
        slot_mapping,
        shape=[num_tokens],
        dtypes=[torch.int64, torch.int32],
        dims="[num_tokens]",
    )
    k_scale, v_scale = check_scales(k_cache, k_scale, v_scale, num_kv_heads)
    check_device(
        _store_kv_kernel,
        k=k,
        v=v,
        k_cache=k_cache,
        v_cache=v_cache,
        slot_mapping=slot_mapping,
        k_scale=k_scale,
        v_scale=v_scale,
    )
    if slot_mapping.device.type == "cpu" and num_tokens > 0:
        lo, hi = int(slot_mapping.min()), int(slot_mapping.max())
        if lo < -1 or hi >= num_blocks * block_size:
            raise KernelInputError(
                f"slot_mapping holds slots {lo}..{hi}; valid slots are -1 (skip) and "
                f"0..{num_blocks * block_size - 1} (num_blocks * block_size - 1)"
            )
    if num_tokens == 0:
        return

    quantized = k_cache.dtype in QUANTIZED_CACHE_DTYPES
    _store_kv_kernel[(num_tokens,)](
        k,
        v,
        k_cache,
        v_cache,
        slot_mapping,
        k_scale if quantized else k_cache,
        v_scale if quantized else v_cache,
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        NUM_KV_HEADS=num_kv_heads,
        HEAD_DIM=head_dim,
        BLOCK_SIZE=block_size,
        BLOCK_H=next_power_of_2(num_kv_heads),
        BLOCK_D=next_power_of_2(head_dim),
        QUANTIZED=quantized,
        CACHE_DTYPE=tl_dtype(k_cache.dtype),
        EMULATE=is_interpreted(_store_kv_kernel),
        num_warps=4,
    )
