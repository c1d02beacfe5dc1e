"""Fused CPU decode: one C call runs every decoder layer for a decode batch (up to 64 rows).

At batch 1 a SmolLM2-135M decode step on the torch path makes about 1,400 aten calls, and its
three big costs are kernels that are slow at these shapes on a 2-core AVX2 CPU: torch's int4
weight-only matmul (compute-bound there: 3.6 GB/s of weights per thread), the CPU flash kernel
over 3 query rows, and the ``index_select`` that gathers each row's K/V blocks first
(docs/benchmarks.md, "Session 9"). ``decode_step.c`` does the whole step in one call:

- **int4 products** on the int4 layers' own grid (``pack_int4``: the same values as
  ``Int4Linear``), fp32 activations: a matrix-vector kernel for one row (four weight rows at a
  time), and for several rows a GEMM that dequantises four weight rows into an L1 buffer and
  multiplies every row by them; OpenMP over weight rows;
- **paged attention** read in place through the block table (no gather), as the tasks of
  ``plan.attention_plan``: runs of whole blocks, each read as contiguous K / V spans for every
  head; blocks several rows share (a cached system prompt) are one task with their queries
  stacked, so they are read once; partials merged by log-sum-exp (split-KV);
- RMSNorm, RoPE (the model's cos / signed-sin tables), the KV store and SwiGLU in between.

The embedding, the final norm, the LM head and sampling stay in torch (``FusedDecode``), and so
do prefills, whose dense GEMMs and flash attention suit those shapes, and decode batches of more
than ``FusedDecode.MAX_ROWS`` rows. ``EngineConfig.fused_cpu_decode`` turns it on or off; by
default it runs wherever it can (``FusedDecode.build`` says why not: the CPU, the compiler,
dtypes, architecture). Numerics: fp32 throughout, so its logits are closer to the float model's
than the torch int4 path's, which rounds activations to bf16 for torch's kernel.
"""

from __future__ import annotations

from .fused import FusedDecode, pack_int4
from .library import CpuDecodeUnavailable, load_library

__all__ = ["CpuDecodeUnavailable", "FusedDecode", "load_library", "pack_int4"]
