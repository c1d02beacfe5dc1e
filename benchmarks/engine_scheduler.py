"""CPU cost of the engine's pure-Python planning: scheduler steps and prefix-cache lookups.

No model runs: the point is how much host time the scheduler and block manager add to each
forward pass. Medians over ``--repeats`` runs in this one process:

- decode step: ``schedule()`` + ``postprocess()`` with ``--seqs`` running sequences of
  ``--context`` tokens each (block tables included), per step and per sequence;
- admission: the first step over ``--waiting`` queued requests that share a cached system prompt,
  cache-aware ordering vs first-come-first-served measured in the same run (the ratio is the
  price of longest-prefix-first);
- prefix match of one ``--prompt``-token request: first call (hashes every block: SHA-256) vs a
  repeat call (hashes memoised on the sequence, dictionary lookups only).

Usage::

    .venv/bin/python benchmarks/engine_scheduler.py
    .venv/bin/python benchmarks/engine_scheduler.py --seqs 256 --context 2048 --repeats 7
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from promptcache.engine.block_manager import BlockManager
from promptcache.engine.config import EngineConfig
from promptcache.engine.sampling_params import SamplingParams
from promptcache.engine.scheduler import Scheduler
from promptcache.engine.sequence import Sequence

BLOCK_SIZE = 16


def median_s(fn: Callable[[], float], repeats: int) -> float:
    """Median of `repeats` calls of `fn`, each returning the seconds it measured."""
    return statistics.median(fn() for _ in range(repeats))


def make_scheduler(num_seqs: int, context: int, **overrides: object) -> Scheduler:
    settings: dict[str, object] = {
        "max_model_len": context + 64,
        "block_size": BLOCK_SIZE,
        "max_num_seqs": num_seqs,
        "max_num_batched_tokens": max(context, num_seqs) * num_seqs,
    }
    settings.update(overrides)
    num_blocks = num_seqs * ((context + 64) // BLOCK_SIZE + 1) + 64
    return Scheduler(EngineConfig(**settings), num_blocks)  # type: ignore[arg-type]


def decode_step_s(num_seqs: int, context: int, steps: int) -> float:
    """Seconds per decode step once `num_seqs` sequences of `context` tokens are running."""
    rng = random.Random(0)
    sched = make_scheduler(num_seqs, context)
    params = SamplingParams(max_tokens=steps + 8, ignore_eos=True)
    for i in range(num_seqs):
        sched.add(Sequence(f"r{i}", [rng.randrange(32000) for _ in range(context)], params))
    batch = sched.schedule()  # prefill everything in one planning step (no model runs)
    sched.postprocess(batch, [1] * len(batch.sampled_seqs))
    start = time.perf_counter()
    for _ in range(steps):
        batch = sched.schedule()
        sched.postprocess(batch, [1] * len(batch.sampled_seqs))
    return (time.perf_counter() - start) / steps


def admission_s(num_waiting: int, system_tokens: int, cache_aware: bool) -> tuple[float, float]:
    """Seconds for the first and second steps over `num_waiting` requests sharing a cached
    system prompt (the first hashes every prompt once; later steps reuse the memoised hashes)."""
    rng = random.Random(1)
    system = [rng.randrange(32000) for _ in range(system_tokens)]
    sched = make_scheduler(
        num_waiting, system_tokens + 64, cache_aware_scheduling=cache_aware, max_num_seqs=8
    )
    params = SamplingParams(max_tokens=4)
    sched.add(Sequence("warm", [*system, 1], params))
    batch = sched.schedule()
    sched.postprocess(batch, [1] * len(batch.sampled_seqs))
    for i in range(num_waiting):
        tail = [rng.randrange(32000) for _ in range(32)]
        prompt = [*system, *tail] if i % 2 else [*tail, *system]  # half share the prefix
        sched.add(Sequence(f"r{i}", prompt, params))
    start = time.perf_counter()
    batch = sched.schedule()
    first = time.perf_counter() - start
    sched.postprocess(batch, [1] * len(batch.sampled_seqs))
    start = time.perf_counter()
    sched.schedule()
    return first, time.perf_counter() - start


def prefix_match_s(prompt_tokens: int) -> tuple[float, float]:
    """(first match incl. hashing, repeat match) seconds for one cached prompt."""
    rng = random.Random(2)
    bm = BlockManager(prompt_tokens // BLOCK_SIZE + 8, BLOCK_SIZE)
    prompt = [rng.randrange(32000) for _ in range(prompt_tokens)]
    warm = Sequence("warm", prompt, SamplingParams())
    bm.allocate(warm, bm.match_prefix(warm), prompt_tokens)
    bm.mark_computed(warm, prompt_tokens)
    seq = Sequence("query", prompt, SamplingParams())
    start = time.perf_counter()
    first = bm.match_prefix(seq)
    mid = time.perf_counter()
    again = bm.match_prefix(seq)
    end = time.perf_counter()
    assert first.num_cached_tokens == again.num_cached_tokens > 0
    return mid - start, end - mid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", type=int, default=64, help="running sequences (decode)")
    parser.add_argument("--context", type=int, default=1024, help="tokens per running sequence")
    parser.add_argument("--steps", type=int, default=50, help="decode steps per repeat")
    parser.add_argument("--waiting", type=int, default=512, help="queued requests (admission)")
    parser.add_argument("--prompt", type=int, default=4096, help="tokens in the matched prompt")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    step = median_s(lambda: decode_step_s(args.seqs, args.context, args.steps), args.repeats)
    print(
        f"decode step, {args.seqs} seqs x {args.context} tokens: {step * 1e6:,.0f} us/step, "
        f"{step * 1e6 / args.seqs:,.1f} us/seq"
    )
    aware = [admission_s(args.waiting, 2048, True) for _ in range(args.repeats)]
    fcfs = [admission_s(args.waiting, 2048, False) for _ in range(args.repeats)]
    for i, name in enumerate(("first", "next")):
        a = statistics.median(r[i] for r in aware)
        f = statistics.median(r[i] for r in fcfs)
        print(
            f"{name} admission step over {args.waiting} waiting (2048-token shared prefix): "
            f"cache-aware {a * 1e3:,.2f} ms, FCFS {f * 1e3:,.2f} ms, ratio {a / f:,.2f}x"
        )
    results = [prefix_match_s(args.prompt) for _ in range(args.repeats)]
    first = statistics.median(r[0] for r in results)
    again = statistics.median(r[1] for r in results)
    blocks = args.prompt // BLOCK_SIZE
    print(
        f"prefix match, {args.prompt} tokens ({blocks} blocks): first {first * 1e3:,.2f} ms "
        f"({first * 1e6 / blocks:,.2f} us/block incl. SHA-256), memoised {again * 1e3:,.3f} ms, "
        f"ratio {first / again:,.1f}x"
    )


if __name__ == "__main__":
    main()
