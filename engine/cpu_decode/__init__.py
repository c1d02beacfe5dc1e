"""Fused CPU forward pass: one C call runs every decoder layer for a batch of new tokens.

The kernel serves every forward pass of an int4 Llama on a CPU with AVX2 and FMA: decode steps
(one new token per sequence) and prefill chunks (several tokens of one sequence), mixed in one
batch if the scheduler mixes them (the package is named for decode steps, its main case). At
batch 1 a SmolLM2-135M decode step on the torch path makes about 1,400 aten calls, and torch's
int4 weight-only matmul, its CPU flash kernel over 3 query rows and the ``index_select`` that
gathers each row's K/V blocks are slow at those shapes on a 2-core AVX2 CPU (torch profiler,
AMD EPYC Zen 3, 2026-12-01). For prefill on the same CPU, fp32 GEMMs against a dense copy and
torch's flash kernel ran at about 115 and 58 GFLOP/s. Speed against the torch path and against
llama.cpp: ``benchmarks/engine_prefill_paths.py`` and ``benchmarks/engine_vs_llamacpp.py``
(docs/benchmarks.md#engine-prefill-paths, docs/benchmarks.md#engine-vs-llamacpp).
``decode_step.c`` does the whole pass in one call:

- **int4 products** on the int4 layers' own grid (the same values as ``Int4Linear``), OpenMP
  over output rows:
  - every row's activations rounded to int16 per group of 32 (an error of at most 2^-16 of
    each group's largest input), the products summed exactly in int32 (``vpmaddwd``) and
    folded into fp32 by the same operations whatever the row count: a row's output is bit for
    bit the same alone as inside a product of many rows (row-invariant numerics), so a
    speculative verify pass's products give each row what a plain step's give it;
  - one row (a decode step at batch 1): a matrix-vector kernel over the same panels
    (``pack_panels``' layout, the kernel's one copy of the weights; 16 weight rows at a time),
    the codes widened to int16 in registers;
  - two rows or more: a GEMM over panels of 16 weight rows (``pack_panels``), each unpacked to
    int16 once and multiplied by every row four at a time. Twice the products per instruction
    of fp32 FMAs: on SmolLM2's shapes at 64 rows, 1.6-1.7x the speed of an fp32 four-row GEMM
    over the same int4 weights (``pc_matmul`` alone, 2 threads, AMD EPYC Zen 4 running this
    AVX2 code, 2026-12-02), at the same top-1 agreement with the fp32 model (docs/engine.md);
- **paged causal attention** read in place through the block table (no gather), as the tasks
  of ``plan.attention_plan``: runs of whole blocks read for a set of rows with their queries
  stacked, so blocks several rows need (a cached system prompt, the keys of a prefill chunk)
  are read once per task; each row masked at its own position; partials merged by
  log-sum-exp (split-KV);
- RMSNorm, RoPE (the model's cos / signed-sin tables), the KV store and SwiGLU in between;
  every row's K/V are stored before any row attends, so a chunk's tokens see each other.

The embedding, the final norm, the LM head and sampling stay in torch (``FusedDecode``); the
head's ranking product (``int8_rows.c``, ``int8_rows_ranker``) runs in this library: its int8
rows against each row's activations rounded to int16, summed exactly, so the head ranks its
logits from the one int8 copy of the vocabulary matrix it shares with the embedding.
``EngineConfig.fused_cpu_decode`` turns it on or off; by default it runs wherever it can
(``FusedDecode.build`` says why not: the CPU, the compiler, dtypes, architecture). Once built it
frees the int4 layers' dense fp32 copies (the torch path's prefill GEMM operand), so the torch
path, which then runs only if a batch has an invalid slot, takes torch's int4 kernel. Numerics:
fp32 activations, int16 into the int4 products, so its logits are closer to the
float model's than the torch int4 path's, which rounds activations to bf16 (2^-9 of each value)
for torch's kernel.
"""

from __future__ import annotations

from .fused import (
    SCRATCH_KEPT_ROWS,
    FusedDecode,
    int8_rows_ranker,
    kernel_codes,
    kernel_weights,
    pack_int4,
    pack_layer_weights,
    pack_panels,
    restore_dense_copies,
)
from .library import CpuDecodeUnavailable, load_library

__all__ = [
    "SCRATCH_KEPT_ROWS",
    "CpuDecodeUnavailable",
    "FusedDecode",
    "int8_rows_ranker",
    "kernel_codes",
    "kernel_weights",
    "load_library",
    "pack_int4",
    "pack_layer_weights",
    "pack_panels",
    "restore_dense_copies",
]
