"""Throughput: continuous batching (ours) vs Hugging Face ``generate`` with static batching.

Workload: 32 requests with random prompt lengths in [32, 512] and output lengths in [16, 128]
(uniform, seeded; ``ignore_eos`` so every request produces exactly its output length), greedy,
fp32, on the random Llama of ``engine_bench_model`` (~26M parameters). Both sides run in this
process, on the same weights, dtype and torch threads:

- ours: ``LLM.generate`` over all 32 requests at once (continuous batching, chunked prefill,
  paged KV, prefix caching on: the prompts share nothing);
- Hugging Face: ``model.generate`` on static batches of ``--hf-batch`` requests (default: 32,
  all of them at once, and 8), prompts left-padded to the longest of the batch, each batch
  decoding until its longest request is done (what static batching means); tokens past a
  request's own length are discarded and not counted.

Reported: wall time, useful output tokens per second (the sum of the requested output
lengths over wall time) and the ratio. Target: ours >= 2x. Correctness: every request's greedy
tokens must equal Hugging Face's (exit status 1 otherwise).

Usage::

    .venv/bin/python benchmarks/engine_throughput.py                 # ~3-4 min on 2 busy cores
    .venv/bin/python benchmarks/engine_throughput.py --requests 8     # quick look
    .venv/bin/python benchmarks/engine_throughput.py --model SmolLM2-135M-Instruct.Q4_1.gguf
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from engine_bench_model import (
    add_model_option,
    build_model,
    fail,
    hf_model,
    machine,
    model_label,
    print_table,
    random_prompts,
)


def run_ours(model_dir: Path, prompts: list[list[int]], outputs: list[int]) -> tuple[float, list]:
    from promptcache.engine import LLM, SamplingParams

    llm = LLM(model_dir, dtype="float32", kv_cache_bytes=512 * 2**20, max_num_seqs=64)
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in outputs]
    llm.generate([prompts[0][:8]], SamplingParams(temperature=0, max_tokens=2))  # warm-up
    start = time.perf_counter()
    results = llm.generate(prompts, params)
    return time.perf_counter() - start, [r.output_token_ids for r in results]


def run_hf(
    model_dir: Path, prompts: list[list[int]], outputs: list[int], batch_size: int
) -> tuple[float, list[list[int]]]:
    import torch

    model = hf_model(model_dir)
    with torch.inference_mode():  # warm-up
        model.generate(torch.tensor([prompts[0][:8]]), max_new_tokens=2, do_sample=False)
    tokens: list[list[int]] = []
    start = time.perf_counter()
    for first in range(0, len(prompts), batch_size):
        batch = prompts[first : first + batch_size]
        width = max(len(p) for p in batch)
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        mask = torch.zeros(len(batch), width, dtype=torch.long)
        for row, prompt in enumerate(batch):  # left padding, as generate() expects
            ids[row, width - len(prompt) :] = torch.tensor(prompt)
            mask[row, width - len(prompt) :] = 1
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max(outputs[first : first + batch_size]),
                do_sample=False,
                pad_token_id=0,
                eos_token_id=None,
            )
        for row in range(len(batch)):
            tokens.append(out[row, width : width + outputs[first + row]].tolist())
    return time.perf_counter() - start, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument(
        "--hf-batch", type=int, nargs="+", default=[32, 8], help="static batch sizes for HF"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: stable on a shared machine; raise it on a quiet one)",
    )
    parser.add_argument("--seed", type=int, default=0)
    add_model_option(parser)
    args = parser.parse_args()

    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(args.threads)
    hf_logging.disable_progress_bar()
    rng = random.Random(args.seed)
    prompt_lens = [rng.randint(32, 512) for _ in range(args.requests)]
    outputs = [rng.randint(16, 128) for _ in range(args.requests)]
    prompts = random_prompts(args.requests, prompt_lens, seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model or build_model(Path(tmp) / "model")
        ours_s, ours_tokens = run_ours(model_dir, prompts, outputs)
        hf_runs = {b: run_hf(model_dir, prompts, outputs, b) for b in args.hf_batch}
        label = model_label(args.model, model_dir)

    useful = sum(outputs)
    print(f"machine: {machine()}")
    print(
        f"model: {label}; {args.requests} requests, "
        f"prompts {min(prompt_lens)}-{max(prompt_lens)} tokens (sum {sum(prompt_lens)}), "
        f"outputs {min(outputs)}-{max(outputs)} tokens (sum {useful})\n"
    )
    baseline = hf_runs[args.hf_batch[0]][0]
    rows = [
        [
            f"HF generate, static batches of {b}",
            f"{hf_s:.1f}",
            f"{useful / hf_s:.1f}",
            f"{baseline / hf_s:.2f}x",
        ]
        for b, (hf_s, _) in hf_runs.items()
    ]
    rows.append(
        [
            "promptcache continuous batching",
            f"{ours_s:.1f}",
            f"{useful / ours_s:.1f}",
            f"{baseline / ours_s:.2f}x",
        ]
    )
    print_table(["engine", "wall s", "output tok/s", f"vs HF batch {args.hf_batch[0]}"], rows)
    for b, (_, hf_tokens) in hf_runs.items():
        wrong = [i for i in range(args.requests) if ours_tokens[i] != hf_tokens[i]]
        if wrong:
            fail(f"greedy tokens differ from transformers (batch {b}) for requests {wrong}")
    print(f"\ncorrectness: all {args.requests} requests' greedy tokens equal transformers'")


if __name__ == "__main__":
    main()
