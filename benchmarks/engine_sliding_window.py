"""RSS and KV blocks of one long generation on a sliding-window model, 1k..16k tokens (#34).

The model is ``../shared/models/tinystories-656k`` re-labelled as a ``MistralForCausalLM`` with
a ``--window``-token sliding window (default 32) and 20,000 positions, written to a temporary
directory. One greedy request (``ignore_eos``) generates 16,384 tokens in a pool of
``--pool-blocks`` blocks of ``--block-size`` tokens (defaults 256 x 8 = 2,048 tokens, an
eighth of the generation), stepped through ``LLMEngine`` with the torch path (float32, one
thread). At 1,024, 2,048, 4,096, 8,192 and 16,384 generated tokens it prints the process's RSS
(``/proc/self/statm``), the pool's blocks in use (``BlockManager.num_used_blocks``) and the
blocks the sequence holds, and the blocks full attention would hold for the same tokens
(``ceil(tokens / block_size)``, arithmetic).

Checks (the run exits non-zero when one fails): the sequence never holds more than
``ceil(window / block_size) + 2`` blocks while decoding, the block manager's invariants hold at
each sample point, and the first 64 generated tokens equal transformers' Mistral (eager
attention, the whole sequence recomputed per token) on the same checkpoint.

Target: RSS flat within 5% from 1k to 16k generated tokens.

Usage::

    .venv/bin/python benchmarks/engine_sliding_window.py    # about 1-2 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from engine_bench_model import fail, machine, print_table

HERE = Path(__file__).resolve().parent
TINYSTORIES = HERE.parent.parent / "shared" / "models" / "tinystories-656k"
POINTS = (1024, 2048, 4096, 8192, 16384)
CHECKED_TOKENS = 64


def build_checkpoint(out_dir: Path, window: int) -> Path:
    """tinystories' weights and tokenizer as a Mistral with a ``window``-token window."""
    config = json.loads((TINYSTORIES / "config.json").read_text())
    config.update(
        architectures=["MistralForCausalLM"],
        model_type="mistral",
        sliding_window=window,
        max_position_embeddings=20000,
    )
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    for src in TINYSTORIES.iterdir():
        if src.name != "config.json":
            shutil.copy(src, out_dir / src.name)
    return out_dir


def rss_bytes() -> int:
    """This process's resident set size now (Linux ``/proc/self/statm``, field 2, in pages)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def hf_greedy(model_dir: Path, prompt: list[int], new_tokens: int) -> list[int]:
    import torch
    from transformers import MistralForCausalLM

    model = MistralForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager"
    )
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            ids.append(int(model(torch.tensor([ids]), use_cache=False).logits[0, -1].argmax()))
    return ids[len(prompt) :]


def run(args: Any, model_dir: Path) -> list[list[object]]:
    from promptcache.engine import LLMEngine, SamplingParams

    engine = LLMEngine.from_pretrained(
        model_dir,
        dtype="float32",
        block_size=args.block_size,
        num_blocks=args.pool_blocks,
        max_num_batched_tokens=64,
        fused_cpu_decode=False,
    )
    sched = engine.scheduler
    bm = sched.block_manager
    bound = math.ceil(args.window / args.block_size) + 2
    prompt = engine.tokenizer.encode("Once upon a time")
    # one token more than the last point, so the sequence still runs (holds blocks) there
    params = SamplingParams(temperature=0.0, max_tokens=POINTS[-1] + 1, ignore_eos=True)
    engine.add_request("long", prompt, params)
    rows: list[list[object]] = []
    generated: list[int] = []
    start = time.perf_counter()
    while engine.has_unfinished_requests():
        for out in engine.step():
            generated = out.output_token_ids
        seq = sched.running[0] if sched.running else None
        if seq is not None and not seq.is_prefill and bm.num_held_blocks(seq) > bound:
            fail(f"the sequence holds {bm.num_held_blocks(seq)} blocks, more than {bound}")
        if seq is not None and seq.num_output_tokens in POINTS:  # one new token per step
            n = seq.num_output_tokens
            bm.check_integrity(sched.running)
            rows.append(
                [
                    f"{n:,}",
                    f"{rss_bytes() / 2**20:.1f}",
                    bm.num_used_blocks,
                    bm.num_held_blocks(seq),
                    math.ceil((len(prompt) + n) / args.block_size),
                    f"{time.perf_counter() - start:.1f}",
                ]
            )
    if len(generated) != POINTS[-1] + 1 or len(rows) != len(POINTS):
        fail(f"generated {len(generated)} tokens, sampled {len(rows)} points")
    rows.append(
        [
            "after the request",
            f"{rss_bytes() / 2**20:.1f}",
            bm.num_used_blocks,
            0,
            0,
            f"{time.perf_counter() - start:.1f}",
        ]
    )
    reference = hf_greedy(model_dir, prompt, CHECKED_TOKENS)
    if generated[:CHECKED_TOKENS] != reference:
        fail(f"first {CHECKED_TOKENS} tokens differ from transformers' Mistral")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=8)
    parser.add_argument("--pool-blocks", type=int, default=256)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        rows = run(args, build_checkpoint(Path(tmp), args.window))
    print(
        f"window {args.window} tokens, blocks of {args.block_size}, pool of "
        f"{args.pool_blocks} blocks ({args.pool_blocks * args.block_size:,} tokens)"
    )
    print_table(
        [
            "generated tokens",
            "RSS (MiB)",
            "pool blocks in use",
            "blocks held by the sequence",
            "blocks full attention would hold",
            "elapsed (s)",
        ],
        rows,
    )
    rss = [float(str(r[1])) for r in rows[: len(POINTS)]]
    spread = (max(rss) - min(rss)) / rss[0]
    verdict = "met" if spread <= 0.05 else "not met"
    print(f"RSS spread, 1k to 16k tokens: {spread:.1%} of the 1k figure (target <= 5%: {verdict})")
    print(f"first {CHECKED_TOKENS} tokens equal transformers' Mistral (eager): yes")


if __name__ == "__main__":
    main()
