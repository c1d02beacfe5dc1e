"""KV memory: bytes allocated vs used by the paged pool (waste), Hugging Face's padded cache for
comparison, and what an int8 / fp8 KV cache saves and costs in logit error against fp32.

1. Paged waste. The throughput workload (32 requests, prompts 32-512, outputs 16-128 tokens,
   seeded) runs through ``LLMEngine.step()``; after every step with only decodes scheduled
   (steady state) we record allocated = blocks referenced by sequences x block bytes and
   used = K/V tokens actually stored (sum of ``seq.num_computed_tokens``) x bytes per token.
   Waste = 1 - used / allocated: only each sequence's last, partly filled block. Target < 4%.
2. Hugging Face padded cache, same requests in one static batch: every row holds
   ``longest prompt + t`` tokens at decode step t, used = each request's own prompt + generated
   tokens (a finished row still holds its cache until the batch ends). Computed from the shapes;
   the per-row length is checked against a real ``DynamicCache`` after a prefill of 4 requests.
3. Quantised KV: bytes per token, blocks in a 64 MiB budget, and logit error vs the fp32 cache,
   from a prefill of 4 x 512 tokens read back through each pool (max |dlogit| / max |logit|,
   mean |dlogit|, top-1 agreement).

Correctness: the fp32 engine's logits must match transformers' forward to 1e-3 (relative),
and quantised logits must stay finite and within half the logit range (exit status 1 otherwise;
their agreement with fp32 is a measurement, model-dependent, not a pass/fail).

Usage::

    .venv/bin/python benchmarks/engine_kv_memory.py      # ~2 min on 2 busy cores
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

from engine_bench_model import (
    TINYSTORIES,
    build_model,
    fail,
    hf_model,
    machine,
    num_parameters,
    print_table,
    random_prompts,
)

BUDGET = 64 * 2**20

#: Natural text for the trained-checkpoint measurement (tinystories-656k).
STORIES = (
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun "
    "with her dog, Max. One day, Lily and Max went to the park. They saw a big tree with red "
    "apples. Lily wanted an apple, but the tree was too tall.",
    "Tom had a red ball. He liked to throw it high in the sky. One day, the ball went over the "
    "fence. Tom was sad. His friend Sue came to help. She found a long stick and they got the "
    "ball back together. Tom said thank you and they played all day.",
    "The sun was hot and the bird was thirsty. It flew to the pond to drink some water. A frog "
    "was sitting on a leaf. The frog said hello to the bird, and the bird said hello back. They "
    "became good friends and met at the pond every morning.",
    "Mia wanted to bake a cake for her mom. She got flour, eggs and milk. Her dad helped her mix "
    "everything in a big bowl. They put the cake in the oven and waited. When it was ready, the "
    "whole house smelled sweet, and mom was very happy.",
)


def paged_waste(model_dir: Path, prompts: list[list[int]], outputs: list[int]) -> dict[str, Any]:
    """Step the engine through the workload; waste over decode-only steps."""
    from promptcache.engine import LLMEngine, SamplingParams

    engine = LLMEngine.from_pretrained(
        model_dir, dtype="float32", kv_cache_bytes=512 * 2**20, enable_prefix_caching=False
    )
    per_token = engine.model_config.kv_bytes_per_token("float32")
    block_bytes = per_token * engine.config.block_size
    for i, (prompt, n) in enumerate(zip(prompts, outputs, strict=True)):
        engine.add_request(
            str(i), prompt, SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
        )
    samples: list[tuple[int, int, int]] = []  # (running seqs, allocated bytes, used bytes)
    scheduler = engine.scheduler
    while engine.has_unfinished_requests():
        engine.step()
        running = scheduler.running
        if (
            not running
            or scheduler.waiting
            or any(s.num_computed_tokens < s.num_prompt_tokens for s in running)
        ):
            continue
        allocated = scheduler.block_manager.num_used_blocks * block_bytes
        used = sum(s.num_computed_tokens for s in running) * per_token
        samples.append((len(running), allocated, used))
    if not samples:
        fail("no decode-only step was observed")
    waste = [1 - used / alloc for _, alloc, used in samples]
    full = [w for (n, _, _), w in zip(samples, waste, strict=True) if n == len(prompts)]
    return {
        "steps": len(samples),
        "mean_waste": statistics.fmean(waste),
        "max_waste": max(waste),
        "full_batch_waste": statistics.fmean(full) if full else float("nan"),
        "peak_allocated": max(a for _, a, _ in samples),
        "per_token": per_token,
    }


def hf_padded_waste(prompts: list[list[int]], outputs: list[int], per_token: int) -> dict[str, Any]:
    """Waste of a static batch's padded KV cache, step by step (from the cache shapes)."""
    width = max(len(p) for p in prompts)
    steps = max(outputs)
    waste, allocated_peak = [], 0
    for t in range(1, steps + 1):
        allocated = len(prompts) * (width + t) * per_token
        used = sum(len(p) + min(t, n) for p, n in zip(prompts, outputs, strict=True)) * per_token
        waste.append(1 - used / allocated)
        allocated_peak = max(allocated_peak, allocated)
    return {
        "mean_waste": statistics.fmean(waste),
        "max_waste": max(waste),
        "peak_allocated": allocated_peak,
    }


def check_hf_cache_shape(model_dir: Path, prompts: list[list[int]]) -> None:
    """A real DynamicCache after a padded prefill holds ``longest prompt`` tokens per row."""
    import torch

    model = hf_model(model_dir)
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.tensor(p)
        mask[row, width - len(p) :] = 1
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, use_cache=True)
    cache = getattr(out, "cache", None) or out.past_key_values
    keys = cache.layers[0].keys
    if tuple(keys.shape[:3]) != (len(prompts), model.config.num_key_value_heads, width):
        fail(f"unexpected HF cache shape {tuple(keys.shape)}")


def prompt_logits(engine: Any, ids: list[int]) -> Any:
    """Logits at every position of one prefill read back through the engine's own KV pool."""
    import torch

    runner = engine.runner
    n = len(ids)
    blocks = list(range(-(-n // runner.block_size)))
    meta = runner.build_metadata("prefill", list(range(n)), [blocks], [n], [n])
    with torch.inference_mode():
        hidden = runner.model(torch.tensor(ids), torch.arange(n), runner.kv_caches, meta)
        return runner.model.compute_logits(hidden).float()


def quantised(model_dir: Path, prompts: list[list[int]] | None = None) -> list[list[str]]:
    """One row per KV dtype; ``prompts`` None = encode ``STORIES`` with the model's tokenizer."""
    import torch

    from promptcache.engine import LLMEngine

    rows = []
    engines = {
        dtype: LLMEngine.from_pretrained(
            model_dir, dtype="float32", kv_cache_bytes=BUDGET, kv_cache_dtype=dtype
        )
        for dtype in ("auto", "int8", "fp8")
    }
    if prompts is None:
        prompts = [engines["auto"].tokenizer.encode(text) for text in STORIES]
    reference = [prompt_logits(engines["auto"], p) for p in prompts]
    hf = hf_model(model_dir)
    with torch.inference_mode():
        for p, ours in zip(prompts, reference, strict=True):
            theirs = hf(torch.tensor([p])).logits[0].float()
            rel = float((ours - theirs).abs().max() / theirs.abs().max())
            if rel > 1e-3:
                fail(f"fp32 paged-cache logits differ from transformers by {rel:.2e} (relative)")
    fp32_blocks = engines["auto"].runner.num_blocks
    for dtype, engine in engines.items():
        runner = engine.runner
        per_token = runner.bytes_per_block // runner.block_size
        if dtype == "auto":
            errors = ["0", "0", "100%"]
        else:
            rel, mean, agree = [], [], []
            for p, ref in zip(prompts, reference, strict=True):
                got = prompt_logits(engine, p)
                rel.append(float((got - ref).abs().max() / ref.abs().max()))
                mean.append(float((got - ref).abs().mean()))
                agree.append(float((got.argmax(-1) == ref.argmax(-1)).float().mean()))
            top1 = statistics.fmean(agree)
            if not max(rel) < 0.5:  # NaN or garbage, not rounding error
                fail(f"{dtype} KV cache: logits off by {max(rel):.2f} of their range")
            errors = [f"{max(rel):.4f}", f"{statistics.fmean(mean):.4f}", f"{top1:.1%}"]
        rows.append(
            [
                "fp32" if dtype == "auto" else dtype,
                str(per_token),
                f"{runner.num_blocks:,}",
                f"{runner.num_blocks * runner.block_size:,}",
                f"{1 - fp32_blocks / runner.num_blocks:.0%}",
                *errors,
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: stable on a shared machine; raise it on a quiet one)",
    )
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    rng = random.Random(0)
    prompt_lens = [rng.randint(32, 512) for _ in range(args.requests)]
    outputs = [rng.randint(16, 128) for _ in range(args.requests)]
    prompts = random_prompts(args.requests, prompt_lens, seed=0)
    logit_prompts = random_prompts(4, [512] * 4, seed=9)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(Path(tmp) / "model")
        params = num_parameters(model_dir)
        paged = paged_waste(model_dir, prompts, outputs)
        hf = hf_padded_waste(prompts, outputs, paged["per_token"])
        check_hf_cache_shape(model_dir, prompts[:4])
        quant_rows = quantised(model_dir, logit_prompts)
    trained_rows = quantised(TINYSTORIES)

    print(f"machine: {machine()}")
    print(
        f"model: random Llama, {params / 1e6:.1f}M parameters, fp32 weights; "
        f"{paged['per_token']:,} KV bytes per fp32 token; block size 16\n"
    )
    print(
        f"{args.requests} requests, prompts {min(prompt_lens)}-{max(prompt_lens)}, outputs "
        f"{min(outputs)}-{max(outputs)} tokens; {paged['steps']} decode-only steps sampled\n"
    )
    print_table(
        ["KV cache", "mean waste", "max waste", "peak allocated MiB"],
        [
            [
                "promptcache paged (blocks in use)",
                f"{paged['mean_waste']:.2%}",
                f"{paged['max_waste']:.2%}",
                f"{paged['peak_allocated'] / 2**20:.1f}",
            ],
            [
                "HF static batch (padded)",
                f"{hf['mean_waste']:.2%}",
                f"{hf['max_waste']:.2%}",
                f"{hf['peak_allocated'] / 2**20:.1f}",
            ],
        ],
    )
    print(
        f"\npaged waste while all {args.requests} requests decode: "
        f"{paged['full_batch_waste']:.2%}\n"
    )
    print(
        f"quantised KV cache, {BUDGET // 2**20} MiB budget, logit error over 4 x 512-token "
        "prefills read back through the pool:\n"
    )
    headers = [
        "KV dtype",
        "bytes/token",
        "blocks",
        "tokens",
        "memory saved per token",
        "max |dlogit|/max|logit|",
        "mean |dlogit|",
        "top-1 agreement",
    ]
    print_table(headers, quant_rows)
    print(
        f"\nthe same on the trained tinystories-656k checkpoint ({len(STORIES)} stories of "
        "natural text, every position):\n"
    )
    print_table(headers, trained_rows)
    print("\ncorrectness: fp32 paged logits equal transformers' (rel. error <= 1e-3)")


if __name__ == "__main__":
    main()
