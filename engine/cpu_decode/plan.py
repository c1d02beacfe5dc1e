"""Which keys each row of a decode batch attends to, as the kernel's tasks (``pc_attn_plan``).

One plan serves every layer of a step (the block tables are the same). The rows' keys are cut
into tasks, each a run of whole blocks of one block table:

- **Shared runs.** Blocks that two or more rows hold at the same table positions (a shared
  system prompt hit in the prefix cache) are one task for all of them, their queries stacked,
  so those K/V are read once per layer instead of once per row. They are the torch decode's
  own (``kept_shared_runs``: its radix walk, kept if they save at least
  ``TorchAttentionBackend.CASCADE_MIN_SAVED_TOKENS`` key reads).
- **Own keys.** Every other run of a row's blocks (always including the block with its newest
  token) is that row's alone.

Runs are cut into about ``2 x threads`` pieces in all, so the threads' tasks balance (split-KV).
Each (task, row) pair yields one partial result; a row's partials are merged by log-sum-exp.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from ..attention.torch_decode import kept_shared_runs
from ..attention.torch_ref import TorchAttentionBackend
from .library import AttnPlan

__all__ = ["AttentionPlan", "attention_plan"]


@dataclass
class AttentionPlan:
    """A built plan: the struct, the tensors it points into, its scratch size in floats."""

    struct: AttnPlan
    tensors: list[torch.Tensor]
    scratch_floats: int
    num_tasks: int
    num_shared_tasks: int


def _pieces(b0: int, b1: int, parts: int) -> list[tuple[int, int]]:
    """``[b0, b1)`` cut into at most ``parts`` runs of at least one block."""
    parts = max(1, min(parts, b1 - b0))
    step = -(-(b1 - b0) // parts)
    return [(a, min(a + step, b1)) for a in range(b0, b1, step)]


def attention_plan(
    lib: ctypes.CDLL,
    dims: ctypes.Structure,
    tables: list[list[int]],
    ctx: list[int],
    block_size: int,
    threads: int,
    heads: int,
    head_dim: int,
) -> AttentionPlan:
    """The plan of one decode batch.

    Args:
        lib, dims: the loaded library and the model's ``Dims`` (for the tasks' scratch sizes).
        tables: each row's block ids (at least ``ceil(ctx / block_size)`` of them).
        ctx: each row's keys in tokens, its new token included (>= 1).
        block_size: tokens per block.
        threads: the kernel's thread count.
        heads, head_dim: query heads and their size (for the partial results' size).
    """
    rows = len(ctx)
    nblocks = [-(-n // block_size) for n in ctx]
    kept: list[tuple[list[int], int, int]] = []
    if rows > 1:
        least = TorchAttentionBackend.CASCADE_MIN_SAVED_TOKENS
        kept = kept_shared_runs(tables, ctx, block_size, least)
    covered: list[list[tuple[int, int]]] = [[] for _ in range(rows)]
    for run_rows, start, end in kept:
        for r in run_rows:
            covered[r].append((start, end))
    # (rows, table row, b0, b1, hi): hi = the last key + 1, absolute in that table's positions
    tasks: list[tuple[list[int], int, int, int, int]] = []
    share = 2 * threads
    for run_rows, start, end in kept:
        for b0, b1 in _pieces(start, end, share):
            tasks.append((run_rows, run_rows[0], b0, b1, b1 * block_size))
    num_shared = len(tasks)
    per_row = max(1, -(-share // rows))
    for r in range(rows):
        prev = 0
        for start, end in [*sorted(covered[r]), (nblocks[r], nblocks[r])]:
            if start > prev:
                for b0, b1 in _pieces(prev, start, per_row):
                    tasks.append(([r], r, b0, b1, ctx[r]))
            prev = max(prev, end)
    rows_start: list[int] = [0]
    task_rows: list[int] = []
    part_of: list[int] = []
    table_row: list[int] = []
    b0s: list[int] = []
    b1s: list[int] = []
    his: list[int] = []
    scratch_of: list[int] = []
    parts: list[list[int]] = [[] for _ in range(rows)]
    offset = 0
    for task_rows_, trow, b0, b1, hi in tasks:
        for r in task_rows_:
            parts[r].append(len(part_of))
            part_of.append(len(part_of))
            task_rows.append(r)
        rows_start.append(len(task_rows))
        table_row.append(trow)
        b0s.append(b0)
        b1s.append(b1)
        his.append(hi)
        scratch_of.append(offset)
        offset += lib.pc_task_scratch_floats(ctypes.byref(dims), len(task_rows_), b1 - b0)
    parts_start = [0]
    for p in parts:
        parts_start.append(parts_start[-1] + len(p))
    row_parts = [i for p in parts for i in p]
    tensors = [
        torch.tensor(v, dtype=torch.int64)
        for v in (
            rows_start,
            task_rows,
            part_of,
            table_row,
            b0s,
            b1s,
            his,
            scratch_of,
            parts_start,
            row_parts,
        )
    ]
    struct = AttnPlan(len(tasks), *(t.data_ptr() for t in tensors), offset)
    total = offset + len(part_of) * heads * (2 + head_dim)
    return AttentionPlan(struct, tensors, total, len(tasks), num_shared)
