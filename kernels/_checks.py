"""Argument checks shared by the kernel wrappers: shapes, dtypes, devices; typed errors only.

Every check raises :class:`promptcache.errors.KernelInputError` naming the argument, what it got
and what it needs, before anything is launched. Values inside index tensors (block ids, lengths)
are checked only for CPU tensors: reading them from a GPU would force a device sync per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

from promptcache.errors import KernelInputError

ACTIVATION_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
"""dtypes of q, k, v and of unquantised caches."""

QUANTIZED_CACHE_DTYPES = (torch.int8, torch.float8_e4m3fn)
"""Cache dtypes that hold codes with a per-kv-head float32 scale (value = code * scale)."""

_TL_DTYPES: dict[torch.dtype, tl.dtype] = {
    torch.float32: tl.float32,
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
    torch.int8: tl.int8,
    torch.float8_e4m3fn: tl.float8e4nv,
}


def tl_dtype(dtype: torch.dtype) -> tl.dtype:
    """The Triton dtype for a torch dtype the kernels accept."""
    return _TL_DTYPES[dtype]


def is_interpreted(kernel: object) -> bool:
    """True when ``kernel`` was built by ``@triton.jit`` under ``TRITON_INTERPRET=1``."""
    return isinstance(kernel, InterpretedFunction)


def check_device(kernel: object, **tensors: torch.Tensor | None) -> torch.device:
    """All tensors on one device, and that device able to run ``kernel``; returns the device.

    CUDA tensors run compiled kernels. CPU tensors run only under the Triton interpreter, which
    must be switched on (``TRITON_INTERPRET=1``) before ``promptcache.kernels`` is imported.
    """
    present = {name: t for name, t in tensors.items() if t is not None}
    devices = {name: t.device for name, t in present.items()}
    first_name, device = next(iter(devices.items()))
    for name, dev in devices.items():
        if dev != device:
            raise KernelInputError(
                f"{name} is on {dev} but {first_name} is on {device}: move all tensors of one "
                "kernel call to the same device"
            )
    if device.type == "cpu" and not is_interpreted(kernel):
        raise KernelInputError(
            "the tensors are on the CPU, but the Triton kernels run on CUDA; to run them on the "
            "CPU (slowly, for tests) set TRITON_INTERPRET=1 before promptcache.kernels is imported"
        )
    if device.type not in ("cpu", "cuda"):
        raise KernelInputError(f"tensors are on {device}; the Triton kernels need cuda (or cpu)")
    return device


def check_tensor(
    name: str,
    t: object,
    *,
    shape: Sequence[int | None],
    dtypes: Sequence[torch.dtype],
    dims: str,
) -> torch.Tensor:
    """``t`` is a tensor with ``len(shape)`` dims matching ``shape`` (None = any) and a dtype in
    ``dtypes``; ``dims`` names the axes for the message, e.g. ``"[num_seqs, num_heads, head_dim]"``.
    """
    if not isinstance(t, torch.Tensor):
        raise KernelInputError(f"{name} must be a torch.Tensor {dims}, got {type(t).__name__}")
    if t.dim() != len(shape) or any(
        want is not None and got != want for got, want in zip(t.shape, shape, strict=False)
    ):
        want_str = ", ".join("*" if s is None else str(s) for s in shape)
        raise KernelInputError(f"{name} must have shape {dims} = [{want_str}], got {list(t.shape)}")
    if t.dtype not in dtypes:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise KernelInputError(
            f"{name} has dtype {str(t.dtype).removeprefix('torch.')}; expected one of: {allowed}"
        )
    if t.numel() > 0 and t.stride(-1) != 1:
        raise KernelInputError(
            f"{name} must be contiguous in its last dimension (stride 1), got strides "
            f"{list(t.stride())}: call .contiguous() first"
        )
    return t


def check_cache_pair(
    k_cache: object, v_cache: object
) -> tuple[torch.Tensor, torch.Tensor, int, int, int, int]:
    """Both caches are [num_blocks, block_size, num_kv_heads, head_dim] of one shape and dtype.

    Returns ``(k_cache, v_cache, num_blocks, block_size, num_kv_heads, head_dim)``.
    """
    dims = "[num_blocks, block_size, num_kv_heads, head_dim]"
    cache_dtypes = ACTIVATION_DTYPES + QUANTIZED_CACHE_DTYPES
    k = check_tensor("k_cache", k_cache, shape=[None] * 4, dtypes=cache_dtypes, dims=dims)
    v = check_tensor("v_cache", v_cache, shape=list(k.shape), dtypes=[k.dtype], dims=dims)
    num_blocks, block_size, num_kv_heads, head_dim = k.shape
    if min(num_blocks, block_size, num_kv_heads, head_dim) < 1:
        raise KernelInputError(f"k_cache has an empty dimension: shape {list(k.shape)}")
    return k, v, num_blocks, block_size, num_kv_heads, head_dim


def check_scales(
    k_cache: torch.Tensor,
    k_scale: object,
    v_scale: object,
    num_kv_heads: int,
    compute_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Scales go with quantised caches only: float32 [num_kv_heads] each, or both None.

    For an unquantised cache whose dtype must equal the activations' (``compute_dtype``), that is
    checked too.
    """
    quantized = k_cache.dtype in QUANTIZED_CACHE_DTYPES
    if not quantized:
        if k_scale is not None or v_scale is not None:
            raise KernelInputError(
                f"k_scale/v_scale were given but the cache dtype is "
                f"{str(k_cache.dtype).removeprefix('torch.')}; scales apply only to int8 and "
                "float8_e4m3fn caches: pass None"
            )
        if compute_dtype is not None and k_cache.dtype != compute_dtype:
            raise KernelInputError(
                f"the cache dtype {str(k_cache.dtype).removeprefix('torch.')} differs from q's "
                f"{str(compute_dtype).removeprefix('torch.')}: an unquantised cache must hold "
                "the model dtype"
            )
        return None, None
    if k_scale is None or v_scale is None:
        raise KernelInputError(
            f"the cache is {str(k_cache.dtype).removeprefix('torch.')}: pass k_scale and v_scale "
            "(float32 [num_kv_heads], value = code * scale)"
        )
    dims = "[num_kv_heads]"
    ks = check_tensor("k_scale", k_scale, shape=[num_kv_heads], dtypes=[torch.float32], dims=dims)
    vs = check_tensor("v_scale", v_scale, shape=[num_kv_heads], dtypes=[torch.float32], dims=dims)
    both = torch.cat([ks, vs])
    if both.device.type == "cpu" and not bool(((both > 0) & torch.isfinite(both)).all()):
        raise KernelInputError("k_scale and v_scale must be positive and finite")
    return ks, vs


def check_block_tables(
    block_tables: torch.Tensor,
    lens: torch.Tensor,
    block_size: int,
    num_blocks: int,
    what: str,
    first: torch.Tensor | None = None,
) -> None:
    """On CPU tensors, every length fits its block table row and every used block id is valid.

    ``lens`` holds the number of cache tokens each sequence reads (``what`` names it);
    ``first``, the first of them it reads (a sliding window's start; default 0): the blocks
    before it may be freed (-1).
    """
    if block_tables.device.type != "cpu" or lens.numel() == 0:
        return
    max_blocks = block_tables.shape[1]
    if int(lens.min()) < 0 or int(lens.max()) > max_blocks * block_size:
        raise KernelInputError(
            f"{what} must lie in [0, max_blocks * block_size] = [0, {max_blocks * block_size}], "
            f"got min {int(lens.min())}, max {int(lens.max())}"
        )
    used = (
        torch.arange(max_blocks) < ((lens.to(torch.int64) + block_size - 1) // block_size)[:, None]
    )
    if first is not None:
        used &= torch.arange(max_blocks) >= (first.to(torch.int64) // block_size)[:, None]
    bad = used & ((block_tables < 0) | (block_tables >= num_blocks))
    if bool(bad.any()):
        # name the first bad entry and the length that reads it: a -1 there is padding that
        # the length runs into (the row is too short for it), a large id is past the pool
        row, col = (int(i) for i in bad.nonzero()[0])
        raise KernelInputError(
            f"block_tables[{row}, {col}] = {int(block_tables[row, col])}, but {what}[{row}] = "
            f"{int(lens[row])} reads that block (tokens {col * block_size}.."
            f"{(col + 1) * block_size - 1}); valid ids are 0..{num_blocks - 1}: give the "
            f"sequence a block there or lower {what}[{row}]"
        )


def check_sliding_window(window: object) -> int | None:
    """``window`` is None or a Python int >= 1 (tokens a query sees, itself included)."""
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise KernelInputError(f"sliding_window must be an int >= 1 or None, got {window!r}")
    return window


def check_softmax_scale(scale: object) -> float:
    """``scale`` is a positive, finite Python number (a tensor would be read as a pointer)."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise KernelInputError(
            f"scale must be a Python float such as head_dim ** -0.5, got {type(scale).__name__}"
        )
    if not math.isfinite(scale) or scale <= 0:
        raise KernelInputError(f"scale must be positive and finite, got {scale}")
    return float(scale)


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (tile sizes must be powers of two)."""
    return int(triton.next_power_of_2(n))
