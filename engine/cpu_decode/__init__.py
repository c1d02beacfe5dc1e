"""Fused CPU decode: one C call runs every decoder layer for a batch of one sequence.

At batch 1 a SmolLM2-135M decode step on the torch path makes about 1,400 aten calls, and its
three big costs are kernels that are slow at these shapes on a 2-core AVX2 CPU: torch's int4
weight-only matmul (compute-bound there: 3.6 GB/s of weights per thread), the CPU flash kernel
over 3 query rows, and the ``index_select`` that gathers each row's K/V blocks first
(docs/benchmarks.md, "Session 9"). ``decode_step.c`` does the whole step in one call:

- **int4 matrix-vector products** on the int4 layers' own grid (``pack_int4``: the same values
  as ``Int4Linear``), fp32 activations, four rows at a time, OpenMP over rows;
- **paged attention** read in place through the block table (no gather), the keys cut into
  ``2 x threads`` runs of whole blocks merged by log-sum-exp (split-KV), every head per run, so
  each block's K and V rows are read as one contiguous span;
- RMSNorm, RoPE (transformers' ``rotate_half`` form), the KV store and SwiGLU in between.

The embedding, the final norm and the LM head stay in torch (``FusedDecode``). Prefill and
batches of several sequences keep the torch path, whose dense GEMMs and cascade attention are
what those shapes need. ``EngineConfig.fused_cpu_decode`` turns it on or off; by default it
runs wherever it can (``FusedDecode.build`` says why not: the CPU, the compiler, dtypes,
architecture). Numerics: fp32 throughout, so its logits are closer to the float model's than
the torch int4 path's, which rounds activations to bf16 for torch's kernel.
"""

from __future__ import annotations

from .fused import FusedDecode, pack_int4
from .library import CpuDecodeUnavailable, load_library

__all__ = ["CpuDecodeUnavailable", "FusedDecode", "load_library", "pack_int4"]
