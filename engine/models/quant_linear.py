"""Weight-only int8 / int4 linear layers for CPU decoding (``EngineConfig.weight_dtype``).

Decoding one token at batch 1 is memory-bound: every weight is read once per token. SmolLM2-135M
streams about 540 MB of fp32 weights per token; int8 reads a quarter of that, int4 about a
sixth (half a byte per weight plus a bf16 scale and zero per 32). On an AVX2-only CPU the
int4 kernel is compute-bound instead: at 1 row it read 3.6 GB/s of packed weights and scales on
one thread and 6-7 GB/s on two, on every SmolLM2 shape (``torch._weight_int4pack_mm_for_cpu``
alone, weights cycled over 8 copies, AMD EPYC Zen 3, 2026-12-01).
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

**Two paths by batch size.** The kernels win for few rows (memory-bound decode); from
``DENSE_MIN_ROWS`` rows (prefill chunks, large decode batches) a layer multiplies by a dense
copy of its dequantised weight instead: the same values as the kernel's. The copy's dtype
depends on the CPU (``DENSE_DTYPE``): bf16, prepacked for oneDNN's GEMM (``PREPACK_DENSE``),
where oneDNN runs bf16 natively (AVX-512 or AVX-NE-CONVERT), rounded to bf16 (relative 2^-9);
fp32 elsewhere (prepacked too), where bf16 GEMMs are emulated and several times slower. The bf16
cut-over was measured with dense weights that were not prepacked (prepacking makes the dense side
faster still, see ``WeightOnlyLinear``), on SmolLM2-135M-Instruct's layer 0 (qkv, o, gate_up, down;
``benchmarks/engine_prefill_paths.py``, 2026-12-01 15:58 UTC, load average 3.2, 1 torch thread:
2-thread runs on this shared machine swung 10x), kernel / dense time: 0.37x at 1 row, 0.76x at 8,
0.98x at 16, 1.17x at 24, 1.67x at 64, 2.47x at 1,088 (another run: 0.91x at 16, 1.20x at 32); on a
quiet machine with 2 threads the bf16 GEMM led at 16 rows too (150 against 85 GFLOP/s), hence the
cut-over at 16. The fp32 one: see ``DENSE_MIN_ROWS``. Cost: ``2 * out * in`` bytes per layer in
bf16, ``4 * out * in`` in fp32 (202 / 404 MiB for SmolLM2's decoder); ``quantize_linears(...,
dense_min_rows=None)`` keeps none. Dequantising per call instead (no extra memory, a pass over each
weight per forward) was not measured.

**Loading.** ``load_model`` quantises each decoder layer as soon as its tensors are in
(``quantize_decoder_layer``), so the fp32 model never exists whole. The token embedding becomes an
``Int8Embedding`` (tied: the int8 head's own rows). The int8 LM head recomputes its top
``HEAD_REFINE_TOP`` logits per row exactly (``refine_top``): its kernel returns bf16, whose step
at a logit of 25 (0.125) exceeded SmolLM2's fp32 margin between "The" and "L" (0.08) on the
"capital of France" prompt. The candidates are ranked by a product over the same int8 rows
(``Int8Linear.ranker``: the fused CPU kernel's, ``engine/cpu_decode/int8_rows.c``, where it runs,
else torch's int8 kernel), so the vocabulary matrix is held once (an int4 ranking copy of
SmolLM2's head took 17 MiB more).

Numerics: quantisation changes the logits, so greedy tokens can differ from the fp32 model's.
Measured top-1 agreement with the fp32 logits over every position of one prompt
(tests/engine/test_quant_linear.py, 2026-12-01 16:15 UTC; int8 embedding, refined head), dense
path / kernel path: SmolLM2-135M-Instruct (Q4_1 GGUF, 512 positions of docs/engine.md) int8
95.1% / 94.3%, int4 95.5% / 95.3% (int4 re-finds the Q4_1 grid; int8's per-row scale does not);
tinystories-656k (fp32 weights, 384 positions) int8 97.9% / 97.9%, int4 80.7% / 82.3%. An fp32
embedding instead moves these by 1.6 points at most (SmolLM2 int4 95.3% / 95.9%).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from promptcache.errors import ConfigError

__all__ = [
    "DENSE_DTYPE",
    "DENSE_MIN_ROWS",
    "HEAD_REFINE_TOP",
    "INT4_GROUP_SIZE",
    "PREPACK_DENSE",
    "REFINE_ROWS",
    "Int4Linear",
    "Int8Embedding",
    "Int8Linear",
    "WeightOnlyLinear",
    "check_quantizable",
    "int4_packable",
    "quantize_decoder_layer",
    "quantize_int4_groups",
    "quantize_int8_rows",
    "quantize_linears",
]

INT4_GROUP_SIZE = 32
"""Input columns sharing one int4 scale/zero pair: llama.cpp's Q4_0/Q4_1 block size."""

HEAD_REFINE_TOP = 64
"""Logits per row the int8 LM head recomputes exactly (``Int8Linear.refine_top``). 64 so that
``top_logprobs`` (at most 20 in OpenAI's API) come out as the int8 head's own: over 1,146
SmolLM2-135M-Instruct decode rows ranked by an int4 pass (coarser than the int8 passes that rank
them now), the 20 largest refined logits were
the exact int8 head's 20 largest in all but 5 rows (1,109 missed with 16 refined, 258 with 32;
the argmax in every row with each), for about 0.05 ms more per row-batch at 1 row and under
1 ms at 16 (2026-12-01)."""

REFINE_ROWS = 4
"""Rows whose ``HEAD_REFINE_TOP`` logits the head recomputes in one product (``Int8Linear``):
bounds that product's operand (the picked int8 rows as fp32) at ``REFINE_ROWS * k * in * 4``
bytes, 0.6 MB for SmolLM2, instead of growing with the rows of a step."""

_CHUNK_ROWS = 1024


def quantize_int8_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8, one scale per row: ``(q int8 [out, in], scale bf16 [out])``.

    ``scale = max|w_row| / 127`` is rounded to bf16 first and ``q = round(w / scale)`` clamped to
    +-127, so ``q * scale`` are exactly the values the int8 kernel multiplies by. Rows are done
    ``_CHUNK_ROWS`` at a time, so a 49,152-row LM head needs a few MB of temporaries, not
    several copies of its float matrix.
    """
    q = torch.empty(weight.shape, dtype=torch.int8)
    scale = torch.empty(weight.shape[0], dtype=torch.bfloat16)
    for start in range(0, weight.shape[0], _CHUNK_ROWS):
        part = weight[start : start + _CHUNK_ROWS].to(torch.float32, copy=True)
        s = (part.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.bfloat16).tiny)
        s16 = s.to(torch.bfloat16)
        scale[start : start + part.shape[0]] = s16
        q[start : start + part.shape[0]] = (
            part.div_(s16.float()[:, None]).round_().clamp_(-127, 127)
        )
    return q, scale


def _int4_grid(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(q [out, in / g, g] in 0..15, scale, zero [out, in / g])`` fp32 of the int4 layout."""
    out_f, in_f = weight.shape
    gs = INT4_GROUP_SIZE
    w = weight.float().reshape(out_f, in_f // gs, gs)
    low, high = w.amin(dim=-1), w.amax(dim=-1)
    scale = ((high - low) / 15).clamp(min=torch.finfo(torch.float32).tiny)
    q = torch.round((w - low[..., None]) / scale[..., None]).clamp(0, 15)
    return q, scale, low + 8 * scale  # the kernel computes (q - 8) * scale + zero


def quantize_int4_groups(
    weight: torch.Tensor, with_values: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Asymmetric int4 in groups of ``INT4_GROUP_SIZE`` input columns, packed for the CPU kernel.

    Rows are done ``_CHUNK_ROWS`` at a time (the packing is row by row), so a 49,152-row LM
    head needs a few MB of temporaries, not several copies of its float matrix.

    Args:
        weight: float ``[out, in]``; ``in`` a multiple of the group size, ``out`` of 16
            (``int4_packable``).
        with_values: also return the dequantised weight.

    Returns:
        ``(packed, scales_and_zeros, values)``: the ``torch._convert_weight_to_int4pack_for_cpu``
        weight (``out * in / 2`` bytes), bf16 ``[in / group, out, 2]`` (the operands of
        ``torch._weight_int4pack_mm_for_cpu``) and, with ``with_values``, fp32 ``[out, in]``: the
        values the kernel multiplies by (bf16 scale and zero, ``(q - 8) * scale + zero``), else
        None.
    """
    out_f, in_f = weight.shape
    # The packing is row by row (each chunk's rows pack alone to the same bytes), so chunks are
    # written into one output instead of concatenated (no second copy at the end).
    packed = torch.empty(out_f, in_f // 2, dtype=torch.uint8)
    sz = torch.empty(in_f // INT4_GROUP_SIZE, out_f, 2, dtype=torch.bfloat16)
    values = torch.empty(out_f, in_f) if with_values else None
    for start in range(0, out_f, _CHUNK_ROWS):
        end = min(start + _CHUNK_ROWS, out_f)
        q, scale, zero = _int4_grid(weight[start:end])
        packed[start:end] = torch._convert_weight_to_int4pack_for_cpu(
            q.to(torch.int32).reshape(end - start, in_f), 1
        )
        sz[:, start:end] = torch.stack([scale, zero], dim=-1).transpose(0, 1)
        if values is not None:
            scale16, zero16 = (t.to(torch.bfloat16).float()[..., None] for t in (scale, zero))
            values[start:end] = ((q - 8) * scale16 + zero16).reshape(end - start, in_f)
    return packed, sz, values


def int4_packable(out_features: int, in_features: int) -> bool:
    """Whether ``quantize_int4_groups`` takes a ``[out, in]`` weight (group and tile sizes)."""
    return in_features % INT4_GROUP_SIZE == 0 and out_features % 16 == 0


class Int8Embedding(nn.Module):
    """Token lookup from int8 rows: ``E[i] = q[i] * scale[i]`` in ``dtype`` (``[..., hidden]``).

    With tied embeddings it shares the int8 LM head's buffers, so the vocabulary matrix is stored
    once, in a quarter of its fp32 bytes (SmolLM2-135M: 28 MB instead of 113 MB).

    Args:
        qweight: int8 ``[vocab, hidden]``.
        scale_bf16: bf16 ``[vocab]``.
        dtype: the activations' dtype.
    """

    qweight: torch.Tensor
    scale_bf16: torch.Tensor

    def __init__(self, qweight: torch.Tensor, scale_bf16: torch.Tensor, dtype: torch.dtype) -> None:
        super().__init__()
        self.register_buffer("qweight", qweight)
        self.register_buffer("scale_bf16", scale_bf16)
        self.dtype = dtype

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids [...]`` int64 -> ``[..., hidden]`` in ``dtype``."""
        flat = ids.reshape(-1)
        rows = self.qweight.index_select(0, flat).float()
        rows.mul_(self.scale_bf16.index_select(0, flat).float()[:, None])
        return rows.to(self.dtype).reshape(*ids.shape, -1)


def _onednn_bf16_native() -> bool:
    """Whether oneDNN's linear over a prepacked bf16 weight runs natively on this CPU: torch has
    oneDNN and reports the CPU bf16-capable (AVX-512 BW/VL/DQ or AVX-NE-CONVERT). On an AVX2-only
    CPU the bf16 reorder raises ("bf16 path needs the cpu support avx_ne_convert or avx512bw,
    avx512vl and avx512dq"); torch's reorder checks the same CPU test that
    ``torch.ops.mkldnn._is_mkldnn_bf16_supported`` reports, so no GEMM is run to find out: a
    probe loads oneDNN's reorder and GEMM kernels, about 8 MiB of RSS kept for good (Intel Xeon,
    AVX-512, 2026-12-04), into every process that imports the engine, the fused CPU kernel's
    included, which keeps no dense copy."""
    if not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
        return False
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


_BF16_PREPACKS = _onednn_bf16_native()

DENSE_DTYPE: torch.dtype = torch.bfloat16 if _BF16_PREPACKS else torch.float32
"""The dtype of the dense copies. bf16 where oneDNN's bf16 GEMM is native; fp32 otherwise, where
bf16 GEMMs are emulated: on an AVX2-only AMD EPYC (2 vCPUs, 1 thread, 2026-12-01, other jobs
running) SmolLM2-135M's decoder shapes took 59 s per 30-layer pass at 1,088 rows in bf16
against 8.7 s in fp32 (MKL), and 3.1 s against 0.76 s at 64 rows. The fp32 copy costs
``4 * out * in`` bytes per layer instead of ``2 * out * in``."""

#: oneDNN's linear with a weight reordered once into its own blocked layout
#: (``torch.ops.mkldnn._reorder_linear_weight`` / ``_linear_pointwise``, the pair inductor's CPU
#: weight freezing uses). A plain ``x @ W.T`` repacks the weight on every call (oneDNN in bf16,
#: MKL in fp32), which dominates at a few dozen rows. fp32 is prepacked wherever torch has
#: oneDNN (not probed: a probe would load oneDNN's kernels, 8 MiB, into every process that
#: imports the engine, the fused CPU kernel's included, which keeps no dense copy).
PREPACK_DENSE: bool = _BF16_PREPACKS or bool(
    torch.backends.mkldnn.is_available()  # type: ignore[no-untyped-call]
)

DENSE_MIN_ROWS: int = 16 if DENSE_DTYPE is torch.bfloat16 else 24 if PREPACK_DENSE else 64
"""Rows (tokens) from which a weight-only layer multiplies by its dense copy instead of the
int4 / int8 kernel: the measured cut-over of ``benchmarks/engine_prefill_paths.py``. 16 for the
prepacked bf16 copy (module docstring). 24 for the prepacked fp32 one: on the AVX2-only EPYC
(2 threads, 2026-12-01 20:44 UTC) SmolLM2-135M's int4 layer 0 took kernel / dense 0.92x the
time at 16 rows (the kernel still ahead: 16-row decode batches), 1.23x at 24, 1.60x at 64 and
2.58x at 1,088. 64 for an fp32 copy that oneDNN does not prepack (MKL repacks it per call):
0.74x at 16 rows, 0.93x at 48, 1.29x at 64 (19:34 UTC, the same machine)."""


class WeightOnlyLinear(nn.Module):
    """Shared forward of the weight-only layers: a kernel for few rows, a dense GEMM above.

    ``dense`` (or None) holds the dequantised weight in ``DENSE_DTYPE``, the same values the
    kernel multiplies by (up to their bf16 rounding in bf16); batches of at least
    ``dense_min_rows`` rows use it. Where oneDNN takes it (``PREPACK_DENSE``) it is stored
    prepacked for oneDNN's GEMM (an opaque ``torch._mkldnn`` tensor, ``[out, in]``, the same
    bytes; ``to_dense()`` gives the plain matrix back). Measured on SmolLM2-135M-Instruct's
    decoder shapes, weights cycled over 30 layers as in a forward pass, 2 threads (2026-12-01):
    in bf16 (AVX-512), 15.9 against 25.0 ms per pass at 16 rows, 43 against 52 ms at 64, 621
    against 747 ms at 1,088, bit-identical results; in fp32 (AVX2-only, one run with other
    jobs running), 1.77 against 3.83 ms per layer at 16 rows and 145 against 181 at 1,088,
    against MKL's fp32 GEMM (other rounding, about 1e-6 relative). Subclasses set
    ``in_features``, ``out_features``, ``bias`` and ``_kernel``.

    A prepacked tensor has no storage, so a layer holding one cannot be deep-copied, pickled,
    saved with ``torch.save`` or cast (``.float()``, ``.to(dtype)``: the cast fails part-way,
    leaving the model unusable); quantise a copy of the float model instead.
    """

    in_features: int
    out_features: int
    bias: nn.Parameter | None
    dense: torch.Tensor | None
    dense_min_rows: int | None

    def _keep_dense(
        self, dense_min_rows: int | None, weight: torch.Tensor | None, prepack: bool = True
    ) -> None:
        """Store ``weight`` (fp32 ``[out, in]``, the dequantised values; None exactly when
        ``dense_min_rows`` is None) as the dense copy, prepacked where ``PREPACK_DENSE`` and
        ``prepack`` say so."""
        self.dense_min_rows = dense_min_rows
        dense = None if weight is None else weight.to(DENSE_DTYPE).contiguous()
        if dense is not None and PREPACK_DENSE and prepack:
            dense = torch.ops.mkldnn._reorder_linear_weight(dense, None)
        self.register_buffer("dense", dense)

    def restore_dense(self, weight: torch.Tensor) -> None:
        """Keep ``weight`` (fp32 ``[out, in]``, the dequantised values) as the dense copy again,
        used from ``DENSE_MIN_ROWS`` rows, after ``drop_dense``."""
        self._keep_dense(DENSE_MIN_ROWS, weight)

    def drop_dense(self) -> None:
        """Free the dense copy: every batch then takes the kernel (the fused CPU decode does
        this once it holds the same values in its own layout)."""
        self.dense = None
        self.dense_min_rows = None

    def _kernel(self, rows: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., in]`` -> ``[..., out]`` in ``x``'s dtype."""
        flat = x if x.dim() == 2 else x.reshape(-1, self.in_features)
        limit = self.dense_min_rows
        dense = self.dense
        out: torch.Tensor
        if dense is not None and limit is not None and flat.shape[0] >= limit:
            rows = flat.to(dense.dtype)
            if dense.is_mkldnn:
                out = torch.ops.mkldnn._linear_pointwise(
                    rows.contiguous(), dense, None, "none", [], ""
                )
            else:
                out = rows @ dense.t()
        else:
            # contiguous: the kernels refuse strided rows, and in a bf16 model ``.to`` copies
            # nothing (MLP.forward's down_proj input is a product over a slice of gate_up)
            out = self._kernel(flat.to(torch.bfloat16).contiguous())
        out = out.to(x.dtype)
        if self.bias is not None:
            out = out + self.bias.to(out.dtype)
        return out if x.dim() == 2 else out.reshape(*x.shape[:-1], self.out_features)


class Int8Linear(WeightOnlyLinear):
    """``y = x @ W.T + b`` with ``W`` stored as int8 ``[out, in]`` and bf16 scales ``[out]``.

    Args:
        linear: the float layer to quantise (its weight is not kept).
        dense_min_rows: batches of at least this many rows multiply by a dense copy of the
            dequantised weight (``DENSE_DTYPE``: ``2 * out * in`` bytes more in bf16, ``4 * out *
            in`` in fp32); None keeps no copy.
        prepack: prepack the dense copy for oneDNN where ``PREPACK_DENSE``; False keeps a plain
            matrix (the loader's, for a copy the fused CPU kernel reads once and frees).
        refine_top: for fp32 inputs, recompute the ``refine_top`` largest outputs of each row
            exactly (fp32 activations times the int8 rows) instead of keeping the ranking pass's
            values: the LM head uses it so greedy picks are not decided by the rounding of the
            pass that ranks them (torch's int8 kernel returns bf16). The ranking pass is
            ``ranker`` where one is set, else torch's int8 kernel; the refined outputs, the ones
            greedy decoding picks from, are the exact int8 values either way, the others the
            ranking pass's.

    Attributes:
        ranker: None, or the product that ranks the outputs for ``refine_top``: called as
            ``ranker(rows, qweight, scale_bf16)`` with fp32 ``rows [R, in]`` (contiguous), it
            returns fp32 ``[R, out]`` approximations of ``rows`` times the int8 rows, without
            the bias. ``FusedDecode.build`` sets the fused CPU kernel's
            (``cpu_decode.int8_rows_ranker``: activations rounded to int16, exact integer sums;
            on SmolLM2-135M-Instruct's ``[49152, 576]`` head as fast as the int4 ranking copy
            this replaced, at 1 and 16 rows); a plain function, so a deep copy of the layer
            shares it and reads its own rows.
    """

    qweight: torch.Tensor
    scale_bf16: torch.Tensor
    ranker: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None

    def __init__(
        self,
        linear: nn.Linear,
        dense_min_rows: int | None = DENSE_MIN_ROWS,
        refine_top: int = 0,
        prepack: bool = True,
    ) -> None:
        super().__init__()
        self.refine_top = refine_top
        self.ranker = None
        weight = linear.weight.detach()
        q, scale = quantize_int8_rows(weight)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("qweight", q)
        self.register_buffer("scale_bf16", scale)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
        dense = None if dense_min_rows is None else q.float() * scale.float()[:, None]
        self._keep_dense(dense_min_rows, dense, prepack)

    def _kernel(self, rows: torch.Tensor) -> torch.Tensor:
        return torch._weight_int8pack_mm(rows, self.qweight, self.scale_bf16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., in]`` -> ``[..., out]`` in ``x``'s dtype; see ``refine_top``."""
        if self.refine_top <= 0 or x.dtype != torch.float32:
            return super().forward(x)
        rows = x.reshape(-1, self.in_features)
        if self.ranker is None:
            flat = super().forward(rows)
        else:
            flat = self.ranker(rows.contiguous(), self.qweight, self.scale_bf16)
            if self.bias is not None:
                flat += self.bias
        # torch's kernel's output is bf16: at a logit of 25 its step is 0.125, so near-ties
        # among the leading tokens (common in greedy decoding) would be decided by rounding. The
        # top candidates are recomputed exactly: fp32 activations times their int8 rows.
        top = flat.topk(min(self.refine_top, self.out_features), dim=-1).indices  # [R, k]
        # REFINE_ROWS rows at a time: their int8 rows as fp32 are k * in * 4 bytes a row (147 KB
        # for SmolLM2), 2.4 MB for a 16-row decode step at once; the same bits either way (one
        # batched product per row)
        exact = torch.empty(top.shape)
        for r0 in range(0, rows.shape[0], REFINE_ROWS):
            r1 = r0 + REFINE_ROWS
            picked = self.qweight[top[r0:r1]].float()
            exact[r0:r1] = torch.einsum("ri,rki->rk", rows[r0:r1], picked)
        exact.mul_(self.scale_bf16[top].float())
        if self.bias is not None:
            exact += self.bias[top].float()
        flat.scatter_(1, top, exact)
        return flat.reshape(*x.shape[:-1], self.out_features)


class Int4Linear(WeightOnlyLinear):
    """``y = x @ W.T + b`` with ``W`` in groups of ``INT4_GROUP_SIZE`` 4-bit values.

    Storage: the packed weight of ``torch._convert_weight_to_int4pack_for_cpu`` (``out * in / 2``
    bytes), bf16 ``scales_and_zeros [in / group, out, 2]`` and, unless ``dense_min_rows`` is
    None, the dense copy (``DENSE_DTYPE``, see ``Int8Linear``). Under the fused CPU kernel the
    packed weight and the scales are freed (``drop_packed``, ``drop_scales``) and rebuilt from
    the kernel's copy, bit for bit, if torch's kernel is ever called.

    Args:
        linear: the float layer to quantise; ``in_features`` must be a multiple of
            ``INT4_GROUP_SIZE``.
        dense_min_rows, prepack: see ``Int8Linear``.

    Raises:
        ConfigError: ``in_features`` is not a multiple of the group size, or ``out_features``
            not a multiple of 16 (the packing kernel's tile).
    """

    qweight: torch.Tensor | None
    scales_and_zeros: torch.Tensor | None

    def __init__(
        self, linear: nn.Linear, dense_min_rows: int | None = DENSE_MIN_ROWS, prepack: bool = True
    ) -> None:
        super().__init__()
        out_f, in_f = linear.out_features, linear.in_features
        gs = INT4_GROUP_SIZE
        if not int4_packable(out_f, in_f):
            raise ConfigError(
                f"weight_dtype='int4' needs layer input sizes that are multiples of {gs} and "
                f"output sizes that are multiples of 16; this model has a {out_f}x{in_f} layer: "
                "use weight_dtype='int8' or 'auto'"
            )
        self.in_features, self.out_features = in_f, out_f
        packed, sz, values = quantize_int4_groups(
            linear.weight.detach(), with_values=dense_min_rows is not None
        )
        self.register_buffer("qweight", packed)
        self.register_buffer("scales_and_zeros", sz)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
        self._keep_dense(dense_min_rows, values, prepack)
        self._codes: Callable[[], torch.Tensor] | None = None
        self._scales: Callable[[], torch.Tensor] | None = None

    def drop_packed(self, codes: Callable[[], torch.Tensor]) -> None:
        """Free torch's packed weight (``qweight``, ``out * in / 2`` bytes) while another holder
        keeps the same codes (the fused CPU kernel's copy, ``cpu_decode.pack_layer_weights``).

        Args:
            codes: returns the codes ``q`` (int32 ``[out, in]``, 0..15, ``w = (q - 8) * scale +
                zero``); ``packed_weight`` repacks them, bit for bit, the first time torch's
                kernel is needed again.
        """
        self.qweight = None
        self._codes = codes

    def packed_weight(self) -> torch.Tensor:
        """``qweight``, repacked from ``drop_packed``'s codes (and kept) where it was freed."""
        if self.qweight is None:
            if self._codes is None:
                raise RuntimeError("this int4 layer holds neither its packed weight nor its codes")
            codes = self._codes()
            packed = torch.empty(self.out_features, self.in_features // 2, dtype=torch.uint8)
            for start in range(0, self.out_features, _CHUNK_ROWS):  # as quantize_int4_groups
                end = min(start + _CHUNK_ROWS, self.out_features)
                packed[start:end] = torch._convert_weight_to_int4pack_for_cpu(codes[start:end], 1)
            self.qweight = packed
            self._codes = None
        return self.qweight

    def drop_scales(self, scales: Callable[[], torch.Tensor]) -> None:
        """Free ``scales_and_zeros`` (bf16 ``[in / group, out, 2]``, ``out * in / 8`` bytes)
        while another holder keeps the same values (the fused CPU kernel's panels,
        ``cpu_decode.pack_layer_weights``, which drops them only where ``scales`` gives them
        back bit for bit).

        Args:
            scales: returns ``scales_and_zeros``; ``packed_scales`` calls it the first time
                they are needed again.
        """
        self.scales_and_zeros = None
        self._scales = scales

    def packed_scales(self) -> torch.Tensor:
        """``scales_and_zeros``, rebuilt (and kept) where ``drop_scales`` freed them."""
        if self.scales_and_zeros is None:
            if self._scales is None:
                raise RuntimeError("this int4 layer holds neither its scales nor their source")
            self.scales_and_zeros = self._scales()
            self._scales = None
        return self.scales_and_zeros

    def _kernel(self, rows: torch.Tensor) -> torch.Tensor:
        return torch._weight_int4pack_mm_for_cpu(
            rows, self.packed_weight(), INT4_GROUP_SIZE, self.packed_scales()
        )


_KINDS: dict[str, type[Int8Linear] | type[Int4Linear]] = {"int8": Int8Linear, "int4": Int4Linear}


def check_quantizable(weight_dtype: str, device: torch.device | str) -> None:
    """Raise ``ConfigError`` unless ``weight_dtype`` is "int8" / "int4" and ``device`` a CPU."""
    if weight_dtype not in _KINDS:
        raise ConfigError(f"weight_dtype must be one of {', '.join(_KINDS)}; got {weight_dtype!r}")
    if torch.device(device).type != "cpu":
        raise ConfigError(
            f"weight_dtype={weight_dtype!r} uses torch's CPU weight-only kernels and the model "
            f"is on {device}: use weight_dtype='auto' there"
        )


def quantize_decoder_layer(
    module: nn.Module,
    weight_dtype: str,
    dense_min_rows: int | None = DENSE_MIN_ROWS,
    prepack: bool = True,
) -> int:
    """Replace every ``nn.Linear`` under ``module`` by its ``weight_dtype`` version, in place.

    The loader calls this on each decoder layer as soon as its weights are loaded, so the float
    weights of one layer at a time exist (see ``LlamaForCausalLM.load_weights``). ``prepack``:
    see ``Int8Linear``; the loader passes False where the fused CPU kernel packs the layer next,
    so oneDNN's kernels are never loaded (about 8 MiB of RSS, see ``_onednn_prepacks``).

    Returns:
        The number of layers replaced.

    Raises:
        ConfigError: an unknown ``weight_dtype``, or (int4) a layer the packer cannot take.
    """
    check_quantizable(weight_dtype, "cpu")
    make = _KINDS[weight_dtype]
    targets = [
        (parent, name, child)
        for parent in module.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)
    ]
    for parent, name, child in targets:
        setattr(parent, name, make(child, dense_min_rows=dense_min_rows, prepack=prepack))
    return len(targets)


def quantize_linears(
    model: nn.Module, weight_dtype: str, dense_min_rows: int | None = DENSE_MIN_ROWS
) -> int:
    """Quantise a loaded model's linear layers (and its token embedding) in place.

    Decoder linears become ``weight_dtype`` layers (``quantize_decoder_layer``). The LM head (a
    child named ``lm_head``) is quantised to int8 under both settings: in int4 it cost
    SmolLM2-135M-Instruct a tenth of its top-1 agreement with the fp32 logits (88.5% vs 96.3%
    over 512 positions with int4 decoder layers), which is why llama.cpp's own quant mixes keep
    ``output.weight`` at 6-8 bits. The top ``HEAD_REFINE_TOP`` logits of each row are
    recomputed exactly from the int8 rows (``Int8Linear.refine_top``).
    The token embedding (a child ``embed_tokens``) becomes an
    ``Int8Embedding``: with tied embeddings it reads the head's own int8 rows, otherwise its
    own int8 copy (top-1 agreement with and without: docs/engine.md).

    Args:
        model: a loaded model on the CPU.
        weight_dtype: "int8" or "int4".
        dense_min_rows: decoder layers keep a dense copy (``DENSE_DTYPE``) of their dequantised
            weight and use it for batches of at least this many rows (prefill chunks, large
            decode batches); None keeps none (the kernels run every batch; ``2 * out * in``
            bytes fewer per layer in bf16, ``4 * out * in`` in fp32). The LM head keeps none: a
            prefill sends it one row per sequence.

    Returns:
        The number of linear layers replaced (the head included).

    Raises:
        ConfigError: an unknown ``weight_dtype``, a model not on the CPU, or (int4) a layer
            whose input size is not a multiple of ``INT4_GROUP_SIZE``.
    """
    check_quantizable(weight_dtype, next(model.parameters()).device)
    count = quantize_vocabulary(model)
    return count + quantize_decoder_layer(model, weight_dtype, dense_min_rows)


def quantize_vocabulary(model: nn.Module) -> int:
    """The LM head and token embedding part of ``quantize_linears``, in place: an ``nn.Linear``
    child ``lm_head`` becomes the int8 head, an ``nn.Embedding`` child ``embed_tokens`` an
    ``Int8Embedding`` (reading the head's rows when the two are tied). Children already
    quantised are left as they are, so the loader can call this as soon as the vocabulary
    matrices are loaded (their float copies are then freed before the decoder layers load) and
    ``quantize_linears`` again at the end.

    Returns:
        The number of linear layers replaced (1 for a float head, else 0).
    """
    head = getattr(model, "lm_head", None)
    embedding = getattr(model, "embed_tokens", None)
    tied = isinstance(head, nn.Linear) and head.weight is getattr(embedding, "weight", None)
    count = 0
    int8_head = None
    if isinstance(head, nn.Linear):
        int8_head = Int8Linear(head, dense_min_rows=None, refine_top=HEAD_REFINE_TOP)
        model.lm_head = int8_head
        count += 1
    if isinstance(embedding, nn.Embedding):
        dtype = embedding.weight.dtype
        if tied and int8_head is not None:
            q, scale = int8_head.qweight, int8_head.scale_bf16
        else:
            q, scale = quantize_int8_rows(embedding.weight.detach())
        model.embed_tokens = Int8Embedding(q, scale, dtype)
    return count
