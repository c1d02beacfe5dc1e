"""Shared-prefix workload: one 1,024-token system prompt, 32 different questions; prefix caching
on vs off.

Each request is the same 1,024-token system prompt followed by its own question (16-64 tokens,
seeded) and produces ``--output`` greedy tokens (``ignore_eos``). All 32 are submitted at once
to ``LLM.generate``; the same workload runs on two engines built from the same checkpoint in
this process, one with ``enable_prefix_caching=False``. Reported: wall time, prefill tokens
actually computed (prompt tokens minus cached ones), output tokens per second, the prefix-cache
hit rate and the speed-up. Correctness: greedy tokens with caching on must equal those with it
off, request by request (exit status 1 otherwise).

Usage::

    .venv/bin/python benchmarks/engine_shared_prefix.py              # ~2-3 min on 2 busy cores
    .venv/bin/python benchmarks/engine_shared_prefix.py --output 32
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from engine_bench_model import (
    add_model_option,
    build_model,
    fail,
    machine,
    model_label,
    print_table,
    random_prompts,
)

SYSTEM_TOKENS = 1024
NUM_QUESTIONS = 32


def run(model_dir: Path, prompts: list[list[int]], output: int, caching: bool) -> dict[str, Any]:
    from promptcache.engine import LLM, SamplingParams

    llm = LLM(
        model_dir,
        dtype="float32",
        kv_cache_bytes=512 * 2**20,
        enable_prefix_caching=caching,
    )
    llm.generate([[5, 6, 7]], SamplingParams(temperature=0, max_tokens=2))  # warm-up
    params = SamplingParams(temperature=0, max_tokens=output, ignore_eos=True)
    before = llm.engine.stats()
    start = time.perf_counter()
    results = llm.generate(prompts, params)
    seconds = time.perf_counter() - start
    after = llm.engine.stats()
    queries = after.prefix_cache_queries_tokens - before.prefix_cache_queries_tokens
    hits = after.prefix_cache_hits_tokens - before.prefix_cache_hits_tokens
    return {
        "seconds": seconds,
        "tokens": [r.output_token_ids for r in results],
        "cached": sum(r.num_cached_tokens for r in results),
        "hit_rate": hits / queries if queries else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=int, default=16, help="output tokens per request")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: stable on a shared machine; raise it on a quiet one)",
    )
    add_model_option(parser)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    rng = random.Random(3)
    [system] = random_prompts(1, [SYSTEM_TOKENS], seed=4)
    questions = random_prompts(
        NUM_QUESTIONS, [rng.randint(16, 64) for _ in range(NUM_QUESTIONS)], seed=5
    )
    prompts = [system + q for q in questions]
    prompt_tokens = sum(len(p) for p in prompts)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model or build_model(Path(tmp) / "model")
        label = model_label(args.model, model_dir)
        off = run(model_dir, prompts, args.output, caching=False)
        on = run(model_dir, prompts, args.output, caching=True)

    useful = NUM_QUESTIONS * args.output
    print(f"machine: {machine()}")
    print(
        f"model: {label}; {NUM_QUESTIONS} requests = "
        f"{SYSTEM_TOKENS}-token system prompt + a 16-64-token question, {args.output} output "
        f"tokens each ({prompt_tokens} prompt tokens in all)\n"
    )
    rows = []
    for name, result in (("off", off), ("on", on)):
        rows.append(
            [
                f"prefix caching {name}",
                f"{result['seconds']:.1f}",
                f"{prompt_tokens - result['cached']:,}",
                f"{result['hit_rate']:.1%}",
                f"{useful / result['seconds']:.1f}",
                f"{off['seconds'] / result['seconds']:.2f}x",
            ]
        )
    print_table(
        [
            "engine",
            "wall s",
            "prefill tokens computed",
            "cache hit rate",
            "output tok/s",
            "speed-up",
        ],
        rows,
    )
    wrong = [i for i in range(NUM_QUESTIONS) if on["tokens"][i] != off["tokens"][i]]
    if wrong:
        fail(f"greedy tokens with prefix caching differ from without for requests {wrong}")
    if on["cached"] == 0:
        fail("prefix caching on reported no cached tokens")
    print(
        f"\ncorrectness: all {NUM_QUESTIONS} requests' greedy tokens are equal with caching on "
        "and off"
    )


if __name__ == "__main__":
    main()
