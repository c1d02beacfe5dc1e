"""Which keys each new token of a forward pass attends to, as the kernel's tasks (``pc_attn_plan``).

One plan serves every layer of a pass (the block tables are the same). Each row (a new token)
sees the keys of its sequence below its position + 1, the causal mask (``row_hi``). The keys
are cut into tasks, each a run of whole blocks of one block table read for a set of rows with
their queries stacked:

- **Decode rows** (a sequence with one new token):
  - *Shared runs.* Blocks that two or more decode rows hold at the same table positions (a
    shared system prompt hit in the prefix cache) are one task for all of them, so those K/V
    are read once per layer instead of once per row. They are the torch decode's own
    (``kept_shared_runs``: its radix walk, kept if they save at least
    ``TorchAttentionBackend.CASCADE_MIN_SAVED_TOKENS`` key reads).
  - *Own keys.* Every other run of a row's blocks (always including the block with its newest
    token) is that row's alone.
- **Prefill rows** (a sequence with several new tokens, a prompt or a chunk of one): tiles of
  ``PREFILL_TILE`` consecutive tokens, each a task over the blocks its last token sees, cut
  into pieces of at most ``PREFILL_PIECE_BLOCKS`` blocks; a tile's tokens are masked per row
  (keys past a row's position get no weight).

Runs are cut into about ``2 x threads`` tasks in all, so the threads' tasks balance (split-KV).
Each (task, row) pair yields one partial result; a row's partials are merged by log-sum-exp.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from ..attention.torch_decode import kept_shared_runs
from ..attention.torch_ref import TorchAttentionBackend
from .library import AttnPlan

__all__ = ["PREFILL_PIECE_BLOCKS", "PREFILL_TILE", "AttentionPlan", "attention_plan"]


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


PREFILL_TILE = 16
"""Prefill tokens whose queries one task stacks (x heads per KV head: 48 for SmolLM2), so each
key and value a task reads serves 48 queries (``attend_stacked``). Tiles of 8 ran about 10%
slower on SmolLM2's warm and cold shapes, 32 within noise (attention alone, 2 threads, AMD EPYC
Zen 3, 2026-12-02)."""

PREFILL_PIECE_BLOCKS = 32
"""Most blocks one prefill task reads (512 keys at 16 tokens a block): long prompts' tiles are
split so the threads' tasks balance (split-KV); 16 measured within noise."""


def attention_plan(
    lib: ctypes.CDLL,
    dims: ctypes.Structure,
    tables: list[list[int]],
    ctx: list[int],
    new: list[int],
    block_size: int,
    threads: int,
    heads: int,
    head_dim: int,
) -> AttentionPlan:
    """The plan of one forward pass.

    Args:
        lib, dims: the loaded library and the model's ``Dims`` (for the tasks' scratch sizes).
        tables: each sequence's block ids (at least ``ceil(ctx / block_size)`` of them).
        ctx: each sequence's keys in tokens after this pass, its new tokens included (>= 1).
        new: each sequence's new tokens (1 .. ctx); rows are the new tokens, sequence by
            sequence, in position order.
        block_size: tokens per block.
        threads: the kernel's thread count.
        heads, head_dim: query heads and their size (for the partial results' size).
    """
    first_row = [0]
    for n in new:
        first_row.append(first_row[-1] + n)
    num_rows = first_row[-1]
    row_hi = [c - n + 1 + i for c, n in zip(ctx, new, strict=True) for i in range(n)]
    decode = [s for s, n in enumerate(new) if n == 1]
    share = 2 * threads
    # (rows, table, b0, b1, hi): hi = the last key + 1, absolute in that table's positions
    tasks: list[tuple[list[int], int, int, int, int]] = []
    kept: list[tuple[list[int], int, int]] = []
    if len(decode) > 1:
        least = TorchAttentionBackend.CASCADE_MIN_SAVED_TOKENS
        runs = kept_shared_runs(
            [tables[s] for s in decode], [ctx[s] for s in decode], block_size, least
        )
        kept = [([decode[i] for i in rows], start, end) for rows, start, end in runs]
    covered: dict[int, list[tuple[int, int]]] = {s: [] for s in decode}
    for run_seqs, start, end in kept:
        for s in run_seqs:
            covered[s].append((start, end))
        for b0, b1 in _pieces(start, end, share):
            tasks.append(([first_row[s] for s in run_seqs], run_seqs[0], b0, b1, b1 * block_size))
    num_shared = len(tasks)
    per_row = max(1, -(-share // max(1, len(decode))))
    for s in decode:
        prev, nblocks = 0, -(-ctx[s] // block_size)
        for start, end in [*sorted(covered[s]), (nblocks, nblocks)]:
            if start > prev:
                for b0, b1 in _pieces(prev, start, per_row):
                    tasks.append(([first_row[s]], s, b0, b1, ctx[s]))
            prev = max(prev, end)
    tiles = [
        (s, a, min(a + PREFILL_TILE, new[s]))
        for s, n in enumerate(new)
        if n > 1
        for a in range(0, n, PREFILL_TILE)
    ]
    per_tile = max(1, -(-share // max(1, len(tiles))))
    for s, a, b in tiles:
        hi = ctx[s] - new[s] + b  # the tile's last token's position + 1
        nblocks = -(-hi // block_size)
        cuts = max(per_tile, -(-nblocks // PREFILL_PIECE_BLOCKS))
        rows = list(range(first_row[s] + a, first_row[s] + b))
        for b0, b1 in _pieces(0, nblocks, cuts):
            tasks.append((rows, s, b0, b1, hi))
    rows_start: list[int] = [0]
    task_rows: list[int] = []
    task_hi: list[int] = []
    part_of: list[int] = []
    table_row: list[int] = []
    b0s: list[int] = []
    b1s: list[int] = []
    his: list[int] = []
    parts: list[list[int]] = [[] for _ in range(num_rows)]
    task_floats = 0
    sizes: set[tuple[int, int]] = set()
    for rows, trow, b0, b1, hi in tasks:
        for r in rows:
            parts[r].append(len(part_of))
            part_of.append(len(part_of))
            task_rows.append(r)
            task_hi.append(row_hi[r])
        rows_start.append(len(task_rows))
        table_row.append(trow)
        b0s.append(b0)
        b1s.append(b1)
        his.append(hi)
        sizes.add((len(rows), b1 - b0))
    for r, nb in sizes:
        task_floats = max(task_floats, lib.pc_task_scratch_floats(ctypes.byref(dims), r, nb))
    parts_start = [0]
    for p in parts:
        parts_start.append(parts_start[-1] + len(p))
    row_parts = [i for p in parts for i in p]
    tensors = [
        torch.tensor(v, dtype=torch.int64)
        for v in (
            rows_start,
            task_rows,
            task_hi,
            part_of,
            table_row,
            b0s,
            b1s,
            his,
            parts_start,
            row_parts,
        )
    ]
    struct = AttnPlan(len(tasks), *(t.data_ptr() for t in tensors), task_floats)
    total = threads * task_floats + len(part_of) * heads * (2 + head_dim)
    return AttentionPlan(struct, tensors, total, len(tasks), num_shared)
