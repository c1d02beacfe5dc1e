"""Decode attention alone, whole-context plan against cascade, on SmolLM2-135M's shapes (#16).

One decode step's attention over all 30 layers (3 KV heads x 64, 9 query heads, fp32 pool of
16-token blocks, the new tokens' K/V already stored), for the two cases of
``benchmarks/engine_vs_llamacpp.py``'s figures 3 and 4:

- ``batch1``: one sequence with a 1,104-token context (figure 3's ~1,100 tokens).
- ``shared16``: 16 sequences over one 1,024-token system prompt (64 blocks every row holds),
  each with its own 32-token question and 32 generated tokens (6 blocks of its own, scattered
  through the pool as decode allocates them).

``whole`` is the plan without the cascade: every row gathers its whole context
(``index_select``) and runs SDPA, rows bucketed by length (``build_decode_plan(cascade=False)``).
``cascade`` is the backend's default plan: the shared prompt gathered once and attended with
the 16 rows' queries stacked, each row's own blocks in one bucket, parts merged by log-sum-exp.
Both run in this process on the same pools, alternating, medians of ``--repeats``; outputs are
compared first.

Usage::

    .venv/bin/python benchmarks/engine_decode_attention.py --threads 1 --repeats 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from promptcache.engine.attention.base import AttnMetadata
from promptcache.engine.attention.torch_decode import build_decode_plan, decode_attention
from promptcache.engine.attention.torch_ref import TorchAttentionBackend

LAYERS, KV_HEADS, HEADS, HEAD_DIM, BLOCK = 30, 3, 9, 64, 16


def case(name: str, gen: torch.Generator) -> tuple[AttnMetadata, int]:
    """(metadata, pool blocks) of one case; block ids drawn at random from the pool."""
    if name == "batch1":
        lens, num_blocks = [1104], 400
        perm = torch.randperm(num_blocks, generator=gen).tolist()
        tables = [perm[: -(-1104 // BLOCK)]]
    else:
        rows, prompt_blocks, own = 16, 64, 6  # 1,024 shared + 32 question + 32 generated
        num_blocks = 400
        perm = torch.randperm(num_blocks, generator=gen).tolist()
        shared = perm[:prompt_blocks]
        tables = [
            shared + perm[prompt_blocks + own * r : prompt_blocks + own * (r + 1)]
            for r in range(rows)
        ]
        lens = [prompt_blocks * BLOCK + 32 + 32] * rows
    width = max(len(t) for t in tables)
    meta = AttnMetadata(
        phase="decode",
        slot_mapping=torch.tensor(
            [
                t[(n - 1) // BLOCK] * BLOCK + (n - 1) % BLOCK
                for t, n in zip(tables, lens, strict=True)
            ]
        ),
        block_tables=torch.tensor([t + [-1] * (width - len(t)) for t in tables], dtype=torch.int32),
        context_lens=torch.tensor(lens, dtype=torch.int32),
        cu_seqlens_q=torch.arange(len(lens) + 1, dtype=torch.int32),
        num_computed_tokens=torch.tensor([n - 1 for n in lens], dtype=torch.int32),
        max_seqlen_q=1,
        max_seqlen_k=max(lens),
    )
    return meta, num_blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    b = TorchAttentionBackend
    print(f"torch {torch.__version__}, {args.threads} thread(s), medians of {args.repeats}")
    for name in ("batch1", "shared16"):
        meta, num_blocks = case(name, gen)
        shape = (num_blocks, BLOCK, KV_HEADS, HEAD_DIM)
        pools = [(torch.randn(shape), torch.randn(shape)) for _ in range(LAYERS)]
        q = torch.randn(meta.num_seqs, HEADS, HEAD_DIM)
        plans = {
            strategy: build_decode_plan(
                meta,
                None,
                BLOCK,
                strategy == "cascade",
                b.BUCKET_RATIO,
                b.BUCKET_SLACK,
                b.CASCADE_MIN_SAVED_TOKENS,
            )
            for strategy in ("whole", "cascade")
        }
        outs = {s: decode_attention(q, *pools[0], p, HEAD_DIM**-0.5) for s, p in plans.items()}
        diff = float((outs["whole"] - outs["cascade"]).abs().max())
        times: dict[str, list[float]] = {s: [] for s in plans}
        for _ in range(args.repeats):
            for strategy, plan in plans.items():
                start = time.perf_counter()
                for k_cache, v_cache in pools:
                    decode_attention(q, k_cache, v_cache, plan, HEAD_DIM**-0.5)
                times[strategy].append(time.perf_counter() - start)
        med = {s: statistics.median(t) * 1000 for s, t in times.items()}
        print(
            f"{name}: {meta.num_seqs} row(s), context {meta.max_seqlen_k}, "
            f"{len(plans['cascade'].shared)} shared prefix(es); 30-layer attention per step: "
            f"whole {med['whole']:.2f} ms, cascade {med['cascade']:.2f} ms "
            f"({med['whole'] / med['cascade']:.2f}x); max |diff| {diff:.1e}"
        )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
