"""Weight-only int8 / int4 linear layers for CPU decoding (``EngineConfig.weight_dtype``).

Decoding one token at batch 1 is memory-bound: every weight is read once per token. SmolLM2-135M
streams about 540 MB of fp32 weights per token; int8 reads a quarter of that, int4 an eighth.
Activations stay in the model dtype between layers; only the matrix product changes:

- **int8**: symmetric, one scale per output channel (``scale = max|w_row| / 127``), computed
  with ``torch._weight_int8pack_mm`` (activations cast to bf16, the kernel's fast path).
- **int4**: asymmetric, one scale and one zero per group of ``INT4_GROUP_SIZE`` input columns
  (``w = (q - 8) * scale + zero``, ``q`` in 0..15), the layout of llama.cpp's Q4_1 (one fp16
  ``d`` and ``m`` per 32 weights, ``w = d * q + m``): a group dequantised from Q4_1 whose
  values reach q = 0 and q = 15 gets its own grid back (its min is ``m``, its max
  ``m + 15 d``), so little more than the bf16 rounding of the scales is lost. Computed with
  ``torch._weight_int4pack_mm_for_cpu`` on weights packed by
  ``torch._convert_weight_to_int4pack_for_cpu``.

Prefill chunks run through the same kernels (measured on SmolLM2, 1,088-token prefill: faster
than dequantising the weight per call for a dense GEMM, slower than the fp32 GEMM; see
docs/benchmarks.md).

Numerics: quantisation changes the logits, so greedy tokens can differ from the fp32 model's.
Measured top-1 agreement with the fp32 logits over every position of one prompt
(tests/engine/test_quant_linear.py, 2026-12-01): SmolLM2-135M-Instruct (Q4_1 GGUF, 512 positions
of docs/engine.md) int8 94.9%, int4 96.3% (int4 re-finds the Q4_1 grid; int8's per-row scale
does not); tinystories-656k (fp32 weights, 384 positions) int8 97.7%, int4 82.6%.
"""

from __future__ import annotations

import torch
from torch import nn

from promptcache.errors import ConfigError

__all__ = [
    "DENSE_MIN_ROWS",
    "INT4_GROUP_SIZE",
    "Int4Linear",
    "Int8Linear",
    "WeightOnlyLinear",
    "quantize_linears",
]

INT4_GROUP_SIZE = 32
"""Input columns sharing one int4 scale/zero pair: llama.cpp's Q4_0/Q4_1 block size."""

DENSE_MIN_ROWS = 8
"""Rows (tokens) from which a weight-only layer multiplies by its dense bf16 copy instead of the
int4 / int8 kernel (measured cut-over, see the module docstring)."""


class WeightOnlyLinear(nn.Module):
    """Shared forward of the weight-only layers: a kernel for few rows, a dense bf16 GEMM above.

    ``dense`` (bf16 ``[out, in]``, or None) holds the dequantised weight, the same values the
    kernel multiplies by (up to their bf16 rounding); batches of at least ``dense_min_rows``
    rows use it. Subclasses set ``in_features``, ``out_features``, ``bias`` and ``_kernel``.
    """

    in_features: int
    out_features: int
    bias: nn.Parameter | None
    dense: torch.Tensor | None
    dense_min_rows: int | None

    def _keep_dense(self, weight: torch.Tensor, dense_min_rows: int | None) -> None:
        """Store ``weight`` (fp32 ``[out, in]``, the dequantised values) as the dense copy."""
        self.dense_min_rows = dense_min_rows
        dense = None if dense_min_rows is None else weight.to(torch.bfloat16).contiguous()
        self.register_buffer("dense", dense)

    def _kernel(self, rows: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., in]`` -> ``[..., out]`` in ``x``'s dtype."""
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        limit = self.dense_min_rows
        if self.dense is not None and limit is not None and rows.shape[0] >= limit:
            out = (rows @ self.dense.t()).to(x.dtype)
        else:
            out = self._kernel(rows).to(x.dtype)
        if self.bias is not None:
            out = out + self.bias.to(out.dtype)
        return out.reshape(*x.shape[:-1], self.out_features)


class Int8Linear(WeightOnlyLinear):
    """``y = x @ W.T + b`` with ``W`` stored as int8 ``[out, in]`` and bf16 scales ``[out]``.

    Args:
        linear: the float layer to quantise (its weight is not kept).
        dense_min_rows: batches of at least this many rows multiply by a dense bf16 copy of the
            dequantised weight (``2 * out * in`` bytes more); None keeps no copy.
    """

    qweight: torch.Tensor
    scale_bf16: torch.Tensor

    def __init__(self, linear: nn.Linear, dense_min_rows: int | None = DENSE_MIN_ROWS) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
        q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("qweight", q.contiguous())
        self.register_buffer("scale_bf16", scale.to(torch.bfloat16))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
        self._keep_dense(q.float() * self.scale_bf16.float()[:, None], dense_min_rows)

    def _kernel(self, rows: torch.Tensor) -> torch.Tensor:
        return torch._weight_int8pack_mm(rows, self.qweight, self.scale_bf16)


class Int4Linear(WeightOnlyLinear):
    """``y = x @ W.T + b`` with ``W`` in groups of ``INT4_GROUP_SIZE`` 4-bit values.

    Storage: the packed weight of ``torch._convert_weight_to_int4pack_for_cpu`` (``out * in / 2``
    bytes), bf16 ``scales_and_zeros [in / group, out, 2]`` and, unless ``dense_min_rows`` is
    None, the dense bf16 copy (``2 * out * in`` bytes).

    Args:
        linear: the float layer to quantise; ``in_features`` must be a multiple of
            ``INT4_GROUP_SIZE``.
        dense_min_rows: see ``Int8Linear``.

    Raises:
        ConfigError: ``in_features`` is not a multiple of the group size, or ``out_features``
            not a multiple of 16 (the packing kernel's tile).
    """

    qweight: torch.Tensor
    scales_and_zeros: torch.Tensor

    def __init__(self, linear: nn.Linear, dense_min_rows: int | None = DENSE_MIN_ROWS) -> None:
        super().__init__()
        out_f, in_f = linear.out_features, linear.in_features
        gs = INT4_GROUP_SIZE
        if in_f % gs or out_f % 16:
            raise ConfigError(
                f"weight_dtype='int4' needs layer input sizes that are multiples of {gs} and "
                f"output sizes that are multiples of 16; this model has a {out_f}x{in_f} layer: "
                "use weight_dtype='int8' or 'auto'"
            )
        w = linear.weight.detach().float().reshape(out_f, in_f // gs, gs)
        low, high = w.amin(dim=-1), w.amax(dim=-1)
        scale = ((high - low) / 15).clamp(min=torch.finfo(torch.float32).tiny)
        q = torch.round((w - low[..., None]) / scale[..., None]).clamp(0, 15)
        zero = low + 8 * scale  # the kernel computes (q - 8) * scale + zero
        self.in_features, self.out_features = in_f, out_f
        packed = torch._convert_weight_to_int4pack_for_cpu(
            q.to(torch.int32).reshape(out_f, in_f), 1
        )
        self.register_buffer("qweight", packed)
        sz = torch.stack([scale, zero], dim=-1).transpose(0, 1).contiguous()
        self.register_buffer("scales_and_zeros", sz.to(torch.bfloat16))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
        # The kernel's own values: bf16 scale and zero, (q - 8) * scale + zero.
        scale16, zero16 = (t.to(torch.bfloat16).float()[..., None] for t in (scale, zero))
        self._keep_dense(((q - 8) * scale16 + zero16).reshape(out_f, in_f), dense_min_rows)

    def _kernel(self, rows: torch.Tensor) -> torch.Tensor:
        return torch._weight_int4pack_mm_for_cpu(
            rows, self.qweight, INT4_GROUP_SIZE, self.scales_and_zeros
        )


def quantize_linears(
    model: nn.Module, weight_dtype: str, dense_min_rows: int | None = DENSE_MIN_ROWS
) -> int:
    """Replace every ``nn.Linear`` under ``model`` by its ``weight_dtype`` version, in place.

    The LM head (a child named ``lm_head``) is quantised to int8 under both settings: in int4 it
    cost SmolLM2-135M-Instruct a tenth of its top-1 agreement with the fp32 logits (88.5% vs
    96.3% over 512 positions with int4 decoder layers), which is why llama.cpp's own quant mixes
    keep ``output.weight`` at 6-8 bits. With tied embeddings the embedding keeps its float matrix
    (token lookup reads a few rows per step) and the head gets its own quantised copy.

    Args:
        model: a loaded model on the CPU.
        weight_dtype: "int8" or "int4".
        dense_min_rows: decoder layers keep a dense bf16 copy of their dequantised weight and
            use it for batches of at least this many rows (prefill chunks, large decode
            batches); None keeps none (the kernels run every batch; ``2 * out * in`` bytes
            fewer per layer). The LM head keeps none: a prefill sends it one row per sequence.

    Returns:
        The number of layers replaced.

    Raises:
        ConfigError: an unknown ``weight_dtype``, a model not on the CPU, or (int4) a layer
            whose input size is not a multiple of ``INT4_GROUP_SIZE``.
    """
    kinds = {"int8": Int8Linear, "int4": Int4Linear}
    if weight_dtype not in kinds:
        raise ConfigError(f"weight_dtype must be one of {', '.join(kinds)}; got {weight_dtype!r}")
    device = next(model.parameters()).device
    if device.type != "cpu":
        raise ConfigError(
            f"weight_dtype={weight_dtype!r} uses torch's CPU weight-only kernels and the model "
            f"is on {device}: use weight_dtype='auto' there"
        )
    make = kinds[weight_dtype]
    targets = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)
    ]
    for parent, name, child in targets:
        if name == "lm_head":
            setattr(parent, name, Int8Linear(child, dense_min_rows=None))
        else:
            setattr(parent, name, make(child, dense_min_rows=dense_min_rows))
    return len(targets)
