"""Prefix cache: TTFT of a request whose 1,024-token prefix is cached vs the same request cold.

For each suffix length S (default 64 and 256 tokens), a request is 1,024 prefix tokens + S new
tokens. TTFT is the time from ``add_request`` to the step that returns the first output token,
through ``LLMEngine`` directly (no HTTP). Cold: ``reset_prefix_cache()`` first, so all
1,024 + S tokens are prefilled. Warm: the prefix was computed once before by a request with a
different suffix, so only the S suffix tokens are prefilled. Medians over ``--repeats``.

Ideal ratio warm/cold = uncached tokens / total tokens = S / (1,024 + S); target: measured
ratio within 1.5x of ideal. Correctness: the warm run's greedy tokens (8 per request) must equal
the cold run's, and the warm run must report 1,024 cached tokens (exit status 1 otherwise).

Usage::

    .venv/bin/python benchmarks/engine_prefix_cache.py                # ~1-2 min on 2 busy cores
    .venv/bin/python benchmarks/engine_prefix_cache.py --suffix 16 64 256 1024 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from engine_bench_model import (
    build_model,
    fail,
    machine,
    num_parameters,
    print_table,
    random_prompts,
)

PREFIX_TOKENS = 1024
OUTPUT_TOKENS = 8


def ttft(engine: Any, request_id: str, prompt: list[int]) -> tuple[float, list[int], int]:
    """(seconds to first token, greedy output tokens, cached prompt tokens) of one request."""
    from promptcache.engine import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=OUTPUT_TOKENS, ignore_eos=True)
    start = time.perf_counter()
    engine.add_request(request_id, prompt, params)
    first = None
    final = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            if first is None and out.new_token_ids:
                first = time.perf_counter() - start
            if out.finished:
                final = out
    if first is None or final is None:
        fail(f"request {request_id} produced no output")
        raise AssertionError  # unreachable: fail() exits
    return first, final.output_token_ids, final.num_cached_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suffix", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: stable on a shared machine; raise it on a quiet one)",
    )
    args = parser.parse_args()

    import torch

    from promptcache.engine import LLMEngine

    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(Path(tmp) / "model")
        params = num_parameters(model_dir)
        engine = LLMEngine.from_pretrained(model_dir, dtype="float32", kv_cache_bytes=256 * 2**20)
        [prefix] = random_prompts(1, [PREFIX_TOKENS], seed=1)
        ttft(engine, "warm-up", prefix[:32])
        counter = 0
        for suffix_len in args.suffix:
            suffixes = random_prompts(args.repeats + 1, [suffix_len] * (args.repeats + 1), seed=2)
            cold_s, warm_s = [], []
            for rep in range(args.repeats):
                prompt = prefix + suffixes[rep]
                engine.reset_prefix_cache()
                counter += 1
                seconds, cold_tokens, cold_cached = ttft(engine, f"cold-{counter}", prompt)
                cold_s.append(seconds)
                engine.reset_prefix_cache()
                ttft(engine, f"prime-{counter}", prefix + suffixes[-1])  # caches the prefix only
                seconds, warm_tokens, warm_cached = ttft(engine, f"warm-{counter}", prompt)
                warm_s.append(seconds)
                if warm_tokens != cold_tokens:
                    fail(f"suffix {suffix_len}: warm tokens {warm_tokens} != cold {cold_tokens}")
                if cold_cached != 0 or warm_cached != PREFIX_TOKENS:
                    fail(
                        f"cached tokens: cold {cold_cached} (want 0), warm {warm_cached} "
                        f"(want {PREFIX_TOKENS})"
                    )
            cold, warm = statistics.median(cold_s), statistics.median(warm_s)
            ideal = suffix_len / (PREFIX_TOKENS + suffix_len)
            measured = warm / cold
            rows.append(
                [
                    f"{PREFIX_TOKENS} + {suffix_len}",
                    f"{cold * 1000:.0f}",
                    f"{warm * 1000:.0f}",
                    f"{measured:.3f}",
                    f"{ideal:.3f}",
                    f"{measured / ideal:.2f}x",
                    "yes" if measured <= 1.5 * ideal else "no",
                ]
            )
    print(f"machine: {machine()}")
    print(
        f"model: random Llama, {params / 1e6:.1f}M parameters, fp32; block size 16; "
        f"medians of {args.repeats}\n"
    )
    print_table(
        [
            "prompt (cached + new)",
            "cold TTFT ms",
            "warm TTFT ms",
            "warm/cold",
            "ideal",
            "vs ideal",
            "within 1.5x",
        ],
        rows,
    )
    print(
        f"\ncorrectness: warm greedy tokens equal cold ones; warm runs report "
        f"{PREFIX_TOKENS} cached tokens"
    )


if __name__ == "__main__":
    main()
