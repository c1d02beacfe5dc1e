"""Decode attention of the torch backend: one query per sequence over its paged KV history.

A decode batch has one new token per sequence; its query attends to every key of its context
(or, with a sliding window, the last ``sliding_window`` of them). The plan below is built once
per batch (``build_decode_plan``) and reused by every layer; ``decode_attention`` runs it.

1. **Shared prefixes (cascade attention).** Sequences whose block tables begin with the same
   block ids (a shared system prompt hit in the prefix cache, the samples of one prompt) hold
   the same keys there. The tables are walked as a radix tree: each run of blocks that the same
   set of two or more rows holds becomes one ``SharedPrefix``, attended in ONE call with those
   rows' queries stacked (for each KV head: ``rows x group`` query rows against the prefix's
   keys), so its K/V are gathered and read once per layer instead of once per row. A run is
   kept only if it saves at least ``min_saved_tokens`` token reads (``(rows - 1) x tokens``);
   shorter ones stay with each row's own keys.
2. **Own keys, bucketed.** Each row's remaining blocks (everything not in a kept shared prefix;
   always at least the block holding its newest token) are sorted by length and cut into
   buckets of similar length; a bucket gathers its rows' blocks with ``index_select`` padded to
   its own longest row and runs one attention call (a mask only when its lengths differ).
3. **Merge.** Without shared prefixes the bucket outputs are the result (plain SDPA). With them
   every call is torch's CPU flash kernel, which also returns each query's log-sum-exp; a row's
   parts are merged as ``lerp(out_a, out_b, sigmoid(lse_b - lse_a))`` with
   ``lse = logaddexp(lse_a, lse_b)``: exactly the softmax over the union of the key sets, up to
   one extra fp32 rounding (about 1e-7 relative).

The cascade needs fp32 queries on the CPU, torch's CPU flash op and no sliding window
(``cascade=False`` otherwise): in bf16 / fp16 each part's output would be rounded once more
before the merge, and a window would cut into shared prefixes. Without it, step 2 alone runs
over each row's whole context (the plan ``benchmarks/engine_decode_attention.py`` calls
``whole``; docs/benchmarks.md#engine-decode-attention compares the two).

Reading K/V in place (a view of consecutive pool blocks, as the prefill does) was measured and
not taken: for one 1,104-token decode row of SmolLM2 (3 KV heads x 64) the flash kernel over
the view took 0.39 ms per layer against 0.28 ms for ``index_select`` (0.09 ms) plus the same
kernel over the contiguous copy, because the kernel's strided reads of a cold pool are slower
than one block-wise copy (30 layer pools, 1 thread, 2026-12-01).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..kv_quant import dequantize
from .base import AttnMetadata

__all__ = [
    "HAS_CPU_FLASH",
    "DecodeBucket",
    "DecodePlan",
    "SharedPrefix",
    "build_decode_plan",
    "cascade_applies",
    "decode_attention",
    "kept_shared_runs",
    "merge_by_lse",
    "read_blocks",
    "shared_runs",
]

#: torch's CPU flash kernel, which returns the log-sum-exp ``merge_by_lse`` needs (a private aten
#: op, present since torch 2.2). Without it decode attends each row's whole context and prefill
#: gathers every cached prefix.
HAS_CPU_FLASH = hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu")


@dataclass
class DecodeBucket:
    """Rows whose own keys have similar lengths, attended in one padded call.

    Attributes:
        rows: ``[B]`` int64 row indices into the batch.
        blocks: ``[B * num_blocks]`` int64 pool block ids, row-major (pads read block 0, masked).
        max_len: the longest row's own keys, in tokens (gathered keys are cut to this length).
        mask: None when every row sees all ``max_len`` keys; else ``[B, 1, 1, max_len]``: bool
            (True = attend) for SDPA, or an additive fp32 mask (0 / -inf) for the flash kernel
            when the plan has shared prefixes.
    """

    rows: torch.Tensor
    blocks: torch.Tensor
    max_len: int
    mask: torch.Tensor | None


@dataclass
class SharedPrefix:
    """Blocks held, at the same table positions, by several rows of the batch.

    Attributes:
        rows: ``[R]`` int64 row indices (R >= 2), ascending.
        blocks: ``[num_blocks]`` int64 pool block ids; all full, every row sees every key.
    """

    rows: torch.Tensor
    blocks: torch.Tensor


@dataclass
class DecodePlan:
    """What one decode batch attends to, for every layer.

    Attributes:
        buckets: every row is in exactly one bucket (its own keys).
        shared: shared prefixes; empty = plain SDPA per bucket, no merge.
        in_order: one bucket holding every row in batch order, so no row gather or scatter.
    """

    buckets: list[DecodeBucket]
    shared: list[SharedPrefix]
    in_order: bool


def shared_runs(tables: list[list[int]], caps: list[int]) -> list[tuple[list[int], int, int]]:
    """Runs of block-table positions that the same two or more rows hold with equal block ids.

    The tables are walked as a radix tree: rows are grouped by their block at a position, each
    group extends while all its rows agree, then splits again.

    Args:
        tables: each row's block ids in position order.
        caps: per row, how many leading positions may be shared (its full blocks before the
            block holding its newest token).

    Returns:
        ``(rows, start, end)`` per run: ascending row indices holding positions
        ``start .. end - 1`` in common; parents come before their children.
    """
    runs: list[tuple[list[int], int, int]] = []
    stack: list[tuple[list[int], int]] = [(list(range(len(tables))), 0)]
    while stack:
        rows, depth = stack.pop()
        groups: dict[int, list[int]] = {}
        for r in rows:
            if caps[r] > depth:
                groups.setdefault(tables[r][depth], []).append(r)
        for group in groups.values():
            if len(group) < 2:
                continue
            limit = min(caps[r] for r in group)
            first = tables[group[0]]
            end = depth + 1
            if all(tables[r][end:limit] == first[end:limit] for r in group[1:]):
                end = limit
            else:
                while end < limit and all(tables[r][end] == first[end] for r in group[1:]):
                    end += 1
            runs.append((group, depth, end))
            stack.append((group, end))
    return runs


def kept_shared_runs(
    tables: list[list[int]], lens: list[int], block_size: int, min_saved_tokens: int
) -> list[tuple[list[int], int, int]]:
    """``shared_runs`` of a decode batch that are worth attending once.

    Args:
        tables: each row's block ids; lens: each row's keys in tokens, its new token included.
        block_size: tokens per block.
        min_saved_tokens: a run is kept if ``(rows - 1) x its tokens`` reaches this.

    Returns:
        ``(rows, start, end)`` as ``shared_runs``; only full blocks before each row's newest
        token's block are shared.
    """
    caps = [(n - 1) // block_size for n in lens]
    return [
        run
        for run in shared_runs(tables, caps)
        if (len(run[0]) - 1) * (run[2] - run[1]) * block_size >= min_saved_tokens
    ]


def build_decode_plan(
    meta: AttnMetadata,
    sliding_window: int | None,
    block_size: int,
    cascade: bool,
    bucket_ratio: float,
    bucket_slack: int,
    min_saved_tokens: int,
) -> DecodePlan:
    """The attention plan of one decode batch (see the module docstring).

    Args:
        meta: the batch (``is_decode``).
        sliding_window: the layer's window in tokens, or None.
        block_size: tokens per pool block.
        cascade: whether shared prefixes may be attended once (fp32 CPU queries, no window).
        bucket_ratio, bucket_slack: a row joins a bucket while its own length is at most
            ``ratio x`` the bucket's shortest ``+ slack`` tokens (rows sorted by length).
        min_saved_tokens: a shared run is kept if ``(rows - 1) x its tokens`` reaches this.
    """
    lens = meta.context_lens.tolist()
    device = meta.context_lens.device
    tables = meta.block_tables.long().clamp(min=0)  # -1 pads read block 0, masked below
    num_rows = len(lens)
    kept: list[tuple[list[int], int, int]] = []
    table_lists: list[list[int]] = []
    if cascade and num_rows > 1:
        table_lists = meta.block_tables.tolist()
        kept = kept_shared_runs(table_lists, lens, block_size, min_saved_tokens)
    own_blocks: list[torch.Tensor] | None = None
    own_lens = lens
    # With a window, a row's own keys start at its first block holding a visible position
    # (the query at len - 1 sees positions >= len - window); earlier entries may be freed
    # (-1, see ``BlockManager.sliding_window``) and are never read.
    offsets: torch.Tensor | None = None
    if sliding_window is not None and max(lens) > sliding_window:
        first_blocks = [max(0, n - sliding_window) // block_size for n in lens]
        own_lens = [n - f * block_size for n, f in zip(lens, first_blocks, strict=True)]
        offsets = torch.tensor(first_blocks, dtype=torch.int64, device=device)
    if kept:
        covered: list[list[tuple[int, int]]] = [[] for _ in range(num_rows)]
        for run_rows, start, end in kept:
            for r in run_rows:
                covered[r].append((start, end))
        own_blocks, own_lens = [], []
        for r in range(num_rows):
            ids, prev = [], 0
            for start, end in sorted(covered[r]):
                ids += table_lists[r][prev:start]
                prev = end
            ids += table_lists[r][prev : -(-lens[r] // block_size)]
            own_blocks.append(torch.tensor(ids, dtype=torch.int64, device=device))
            own_lens.append(lens[r] - sum(end - start for start, end in covered[r]) * block_size)
    order = sorted(range(num_rows), key=own_lens.__getitem__)
    buckets: list[DecodeBucket] = []
    first = 0
    while first < num_rows:
        last = first + 1
        limit = bucket_ratio * own_lens[order[first]] + bucket_slack
        while last < num_rows and own_lens[order[last]] <= limit:
            last += 1
        members = order[first:last]
        rows = torch.tensor(members, dtype=torch.int64, device=device)
        bucket_lens = [own_lens[i] for i in members]
        max_len = max(bucket_lens)
        num_blocks = -(-max_len // block_size)
        mask = None
        if sliding_window is not None or min(bucket_lens) != max_len:
            # Own keys are in position order and only the last block is partly filled, so
            # the newest key of a row is its key own_len - 1 (a window implies no cascade:
            # own keys are then the context from the row's first block in the window, and
            # positions relative to that block keep the window's distances).
            q_pos = torch.tensor(bucket_lens, device=device).unsqueeze(-1) - 1  # [B, 1]
            k_pos = torch.arange(max_len, device=device).expand(len(members), -1)
            allowed = k_pos <= q_pos
            if sliding_window is not None:
                allowed &= k_pos > q_pos - sliding_window
            mask = allowed[:, None, None]  # [B, 1, 1, max_len]
            if kept:
                mask = torch.zeros(mask.shape, device=device).masked_fill_(~mask, float("-inf"))
        if offsets is not None:
            cols = offsets.index_select(0, rows)[:, None] + torch.arange(num_blocks, device=device)
            cols = cols.clamp(max=tables.shape[1] - 1)  # past a row's end: a pad, masked
            blocks = tables.index_select(0, rows).gather(1, cols).flatten()
        elif own_blocks is None:
            blocks = tables.index_select(0, rows)[:, :num_blocks].flatten()
        else:
            padded = [
                F.pad(own_blocks[i], (0, num_blocks - own_blocks[i].shape[0])) for i in members
            ]
            blocks = torch.cat(padded)
        buckets.append(DecodeBucket(rows, blocks, max_len, mask))
        first = last
    shared = [
        SharedPrefix(
            torch.tensor(run_rows, dtype=torch.int64, device=device),
            torch.tensor(table_lists[run_rows[0]][start:end], dtype=torch.int64, device=device),
        )
        for run_rows, start, end in kept
    ]
    in_order = len(buckets) == 1 and order == list(range(num_rows))
    return DecodePlan(buckets, shared, in_order)


def read_blocks(
    cache: torch.Tensor, blocks: torch.Tensor, dtype: torch.dtype, scale: torch.Tensor | None
) -> torch.Tensor:
    """Pool blocks ``blocks [n]`` int64 as ``[n, block_size, kv_heads, head_dim]`` in ``dtype``
    (dequantised with the per-head ``scale`` for an int8 / fp8 pool, else None)."""
    kv = cache.index_select(0, blocks)
    if scale is not None:
        return dequantize(kv, scale, dtype)
    return kv if kv.dtype == dtype else kv.to(dtype)


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    plan: DecodePlan,
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Run ``plan`` for one layer: ``q [num_seqs, heads, head_dim]`` -> same shape and dtype.

    Args:
        q: one query per sequence, in batch order.
        k_cache, v_cache: the layer's pool, ``[num_blocks, block_size, kv_heads, head_dim]``
            (the new tokens' K/V already stored).
        plan: from ``build_decode_plan`` for this batch.
        scale: softmax scale.
        k_scale, v_scale: ``[kv_heads]`` fp32 scales of an int8 / fp8 pool, else None.
    """
    num_rows, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    group = num_heads // num_kv_heads
    with_lse = bool(plan.shared)
    # (in_order without shared prefixes returns the one bucket's output: nothing to allocate)
    out = None if plan.in_order and not with_lse else torch.empty_like(q)
    lse = q.new_empty(num_rows, num_kv_heads, group, dtype=torch.float32) if with_lse else None
    for bucket in plan.buckets:
        n = bucket.rows.shape[0]
        shape = (n, -1, num_kv_heads, head_dim)
        cut = bucket.max_len
        keys = read_blocks(k_cache, bucket.blocks, q.dtype, k_scale).view(shape)[:, :cut]
        values = read_blocks(v_cache, bucket.blocks, q.dtype, v_scale).view(shape)[:, :cut]
        # GQA as a longer query: the heads sharing a KV head become that head's query rows
        # ([B, kv_heads, group, head_dim]); every row may see the same keys, so the mask
        # broadcasts. On CPU this beats enable_gqa, which expands K and V per query head.
        rows_q = q if plan.in_order else q.index_select(0, bucket.rows)
        o, part_lse = _attend(
            rows_q.view(n, num_kv_heads, group, head_dim),
            keys.transpose(1, 2),
            values.transpose(1, 2),
            bucket.mask,
            scale,
            with_lse,
        )
        if out is None:
            return o.reshape(num_rows, num_heads, head_dim)
        out.index_copy_(0, bucket.rows, o.reshape(n, num_heads, head_dim))
        if lse is not None and part_lse is not None:
            lse.index_copy_(0, bucket.rows, part_lse)
    assert out is not None
    for prefix in plan.shared:
        assert lse is not None
        n = prefix.rows.shape[0]
        keys = read_blocks(k_cache, prefix.blocks, q.dtype, k_scale).flatten(0, 1)
        values = read_blocks(v_cache, prefix.blocks, q.dtype, v_scale).flatten(0, 1)
        # The rows' queries stacked per KV head: [1, kv_heads, rows x group, head_dim].
        stacked = q.index_select(0, prefix.rows).view(n, num_kv_heads, group, head_dim)
        stacked = stacked.transpose(0, 1).reshape(1, num_kv_heads, n * group, head_dim)
        o, part_lse = _attend(
            stacked, keys.transpose(0, 1)[None], values.transpose(0, 1)[None], None, scale, True
        )
        assert part_lse is not None
        o = o.view(num_kv_heads, n, group, head_dim).transpose(0, 1)
        part_lse = part_lse.view(num_kv_heads, n, group).transpose(0, 1)
        prev = out.index_select(0, prefix.rows).view(n, num_kv_heads, group, head_dim)
        prev_lse = lse.index_select(0, prefix.rows)
        merged = merge_by_lse(prev, prev_lse, o, part_lse)
        out.index_copy_(0, prefix.rows, merged.reshape(n, num_heads, -1))
        lse.index_copy_(0, prefix.rows, torch.logaddexp(prev_lse, part_lse))
    return out


def merge_by_lse(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> torch.Tensor:
    """Attention over the union of two key sets from each set's own attention.

    Args:
        out_a, out_b: ``[..., head_dim]`` each part's output (softmax-weighted values).
        lse_a, lse_b: ``[...]`` fp32, each query's log-sum-exp of its scaled scores in that part.

    Returns:
        ``[..., head_dim]`` in ``out_a``'s dtype: the parts weighted by ``exp(lse)``, normalised,
        i.e. ``lerp(out_a, out_b, sigmoid(lse_b - lse_a))`` (one more rounding than a single
        softmax: about 1e-7 relative in fp32). The merged log-sum-exp is
        ``logaddexp(lse_a, lse_b)``.
    """
    weight = torch.sigmoid(lse_b - lse_a).unsqueeze(-1).to(out_a.dtype)
    return torch.lerp(out_a, out_b, weight)


def _attend(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
    with_lse: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``q [B, kv_heads, rows, hd]`` over ``keys/values [B, kv_heads, len, hd]``.

    Returns the output ``[B, kv_heads, rows, hd]`` and, with ``with_lse`` (torch's CPU flash
    kernel, fp32 on the CPU), each query's log-sum-exp ``[B, kv_heads, rows]`` fp32.
    """
    if not with_lse:
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scale), None
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, keys, values, attn_mask=mask, scale=scale
    )
    return out, lse


def cascade_applies(q: torch.Tensor, sliding_window: int | None) -> bool:
    """Whether shared prefixes may be attended once for queries like ``q`` (see module doc)."""
    return (
        HAS_CPU_FLASH
        and sliding_window is None
        and q.device.type == "cpu"
        and q.dtype == torch.float32
    )
