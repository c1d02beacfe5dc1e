"""INT8 / FP8 (e4m3) KV cache quantisation with one static scale per KV head.

A quantised cache stores ``round(x / scale)`` (int8, clamped to [-127, 127]) or ``x / scale``
cast to ``torch.float8_e4m3fn`` (clamped to +-448), where ``scale`` has one fp32 value per KV
head and layer, fixed for the engine's lifetime: the prefix cache reuses stored blocks across
requests, so a block must mean the same thing whenever it is read. Scales come from a calibration
forward pass at start-up (``scales_from_amax``); the runner picks the headroom below.

Error (measured in tests/engine/test_kv_quant.py on the tinystories checkpoint): see
docs/engine.md, "Quantised KV cache".
"""

from __future__ import annotations

import torch

from promptcache.errors import ConfigError

__all__ = [
    "FP8_MAX",
    "INT8_MAX",
    "dequantize",
    "is_quantized",
    "kv_cache_torch_dtype",
    "quantize",
    "scales_from_amax",
]

INT8_MAX = 127.0
FP8_MAX = float(torch.finfo(torch.float8_e4m3fn).max)  # 448.0

#: Calibrated amax is multiplied by this before it becomes the largest representable value.
#: int8 steps are uniform, so headroom costs precision: keep it small. fp8 precision is relative,
#: so headroom is nearly free and guards against saturating unseen outliers.
HEADROOM = {torch.int8: 1.25, torch.float8_e4m3fn: 4.0}


def kv_cache_torch_dtype(kv_cache_dtype: str, model_dtype: torch.dtype) -> torch.dtype:
    """Map a ``--kv-cache-dtype`` value to the pool's torch dtype ("auto" = the model dtype).

    Raises:
        ConfigError: an unknown name.
    """
    table = {
        "auto": model_dtype,
        "float32": torch.float32,
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
        "int8": torch.int8,
        "fp8": torch.float8_e4m3fn,
    }
    if kv_cache_dtype not in table:
        raise ConfigError(
            f"kv_cache_dtype={kv_cache_dtype!r} is not supported; use one of {', '.join(table)}"
        )
    return table[kv_cache_dtype]


def is_quantized(dtype: torch.dtype) -> bool:
    """True for the cache dtypes that need per-head scales (int8, float8_e4m3fn)."""
    return dtype in (torch.int8, torch.float8_e4m3fn)


def scales_from_amax(amax: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Per-head scales from calibrated absolute maxima.

    Args:
        amax: ``[num_kv_heads]`` largest |value| seen per head during calibration.
        dtype: ``torch.int8`` or ``torch.float8_e4m3fn``.

    Returns:
        ``[num_kv_heads]`` fp32 scales; a head that was all zeros gets scale 1.
    """
    qmax = INT8_MAX if dtype == torch.int8 else FP8_MAX
    amax = amax.float() * HEADROOM[dtype]
    return torch.where(amax > 0, amax / qmax, torch.ones_like(amax))


def quantize(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Quantise keys or values.

    Args:
        x: ``[..., num_kv_heads, head_dim]`` float tensor.
        scale: ``[num_kv_heads]`` fp32 per-head scales.
        dtype: ``torch.int8`` or ``torch.float8_e4m3fn``.

    Returns:
        ``x / scale`` in ``dtype``, saturated at the format's limits (int8 also rounded to nearest).
    """
    y = x.float() / scale.to(x.device)[:, None]
    if dtype == torch.int8:
        return y.round().clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return y.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def dequantize(xq: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """Inverse of ``quantize``: ``[..., num_kv_heads, head_dim]`` -> ``out_dtype``."""
    return (xq.float() * scale.to(xq.device)[:, None]).to(out_dtype)
