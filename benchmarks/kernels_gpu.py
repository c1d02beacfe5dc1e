"""GPU benchmark of the Triton kernels against the machine's own ceilings, with correctness checks.

One run:

1. ceilings: device-to-device copy bandwidth (``dst.copy_(src)`` of 2 GiB, read + write bytes)
   and a bf16 matmul rate (8192^3);
2. paged decode over batch 1..256 x context 1k..128k (32 query heads, 8 kv heads, head_dim 128,
   block size 16, shuffled block tables), bf16 and fp8 e4m3 caches: time per call, KV bytes read
   per second, and that rate as a fraction of the copy bandwidth;
3. extend attention (prefill, chunked prefill, prefill after a prefix-cache hit) against torch
   ``scaled_dot_product_attention`` on the flash backend with the equivalent contiguous layout
   (kv heads repeated to the query heads, bottom-right causal mask): TFLOP/s and the ratio;
4. every kernel result is checked against :mod:`promptcache.kernels.reference` (float64; first and
   last sequence of each batch) and extend also against SDPA; a failed check fails the run.

Timing: CUDA events around each call, a 256 MiB write between calls so no data stays in L2, the
median of ``--repeats`` calls after warm-up.

Usage::

    python benchmarks/kernels_gpu.py                  # needs CUDA; prints the table
    python benchmarks/kernels_gpu.py --json out.json  # also writes every row
    python benchmarks/kernels_gpu.py --check-only     # CPU, Triton interpreter, tiny shapes (CI)

``--check-only`` sets ``TRITON_INTERPRET=1`` itself and runs the same code paths on tiny shapes
on the CPU (its times are interpreter times and mean nothing; targets are not judged); it exits
1 if any check fails. Without ``--check-only`` and without CUDA the script exits 2 and says so.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

GIB = 1024**3

DECODE_BATCHES = (1, 4, 16, 32, 64, 128, 256)
DECODE_CONTEXTS = (1024, 4096, 16384, 32768, 131072)
# (num_seqs, prefix_len, new tokens per sequence)
EXTEND_CONFIGS = ((1, 0, 16384), (4, 0, 4096), (8, 0, 1024), (16, 2048, 512), (4, 8192, 1024))

CHECK_DECODE_BATCHES = (1, 3)
CHECK_DECODE_CONTEXTS = (1, 300)
CHECK_EXTEND_CONFIGS = ((2, 0, 20), (2, 37, 9))

DECODE_TARGET = 0.75  # of copy bandwidth, at batch >= 32 and context >= 4k (issue 8)
EXTEND_TARGET = 0.8  # of SDPA flash throughput


@dataclass
class Shape:
    """Attention shape of one benchmark run."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int


FULL_SHAPE = Shape(num_heads=32, num_kv_heads=8, head_dim=128, block_size=16)
CHECK_SHAPE = Shape(num_heads=8, num_kv_heads=2, head_dim=64, block_size=16)


@dataclass
class Row:
    """One line of the results table."""

    kernel: str
    config: str
    ms: float | None = None
    rate: str = ""
    fraction: float | None = None
    target_met: bool | None = None
    max_rel_err: float | None = None
    ok: bool = True
    note: str = ""


@dataclass
class Report:
    device: str
    copy_gbps: float | None = None
    matmul_tflops: float | None = None
    rows: list[Row] = field(default_factory=list)


class Timer:
    """Median time of a function in ms, the cache flushed before every call.

    On CUDA: CUDA events, and a 256 MiB write between calls so no data stays in L2. On the CPU
    (check-only) ``time.perf_counter`` with a small flush: this only exercises the code path, the
    interpreter's times mean nothing.
    """

    def __init__(self, device: torch.device, repeats: int, warmup: int) -> None:
        import torch

        self.device = device
        self.repeats = repeats
        self.warmup = warmup
        flush_bytes = 256 * 1024**2 if device.type == "cuda" else 1024**2
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device)
        self.meaningful = device.type == "cuda"
        """Whether the times say anything about the kernels (False under the interpreter)."""

    def __call__(self, fn: Callable[[], object]) -> float:
        import torch

        for _ in range(self.warmup):
            fn()
        times = []
        for _ in range(self.repeats):
            self.flush.zero_()
            if self.device.type == "cuda":
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize(self.device)
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        return float(statistics.median(times))


def measure_ceilings(
    device: torch.device, timer: Timer, copy_bytes: int = 2 * GIB, matmul_n: int = 8192
) -> tuple[float, float]:
    """(copy bandwidth GB/s counting read + write bytes, bf16 matmul TFLOP/s)."""
    import torch

    src = torch.empty(copy_bytes, dtype=torch.uint8, device=device).random_()
    copy_ms = timer(functools.partial(torch.empty_like(src).copy_, src))
    copy_gbps = 2 * copy_bytes / (copy_ms * 1e-3) / 1e9
    del src  # free it before the matmul
    n = matmul_n
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    mm_ms = timer(functools.partial(torch.matmul, a, b))
    return copy_gbps, 2 * n**3 / (mm_ms * 1e-3) / 1e12


def _block_tables(
    num_seqs: int, context: int, block_size: int, device: torch.device, gen: torch.Generator
) -> tuple[torch.Tensor, int]:
    """Each sequence gets ceil(context / block_size) blocks from one shuffled pool."""
    import torch

    per_seq = math.ceil(context / block_size)
    num_blocks = num_seqs * per_seq
    perm = torch.randperm(num_blocks, generator=gen)
    return perm.view(num_seqs, per_seq).to(torch.int32).to(device), num_blocks


def _random_cache(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Random K or V codes: normal values (bf16), or normal values cast to e4m3 (fp8)."""
    import torch

    cache = torch.empty(shape, dtype=dtype, device=device)
    chunk = 1 << 26  # fill in slices: no float32 copy of a 50 GiB pool
    flat = cache.view(-1)
    for start in range(0, flat.numel(), chunk):
        part = flat[start : start + chunk]
        part.copy_(torch.randn(part.numel(), device=device).to(dtype))
    return cache


def _rows_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Max over (token, head) rows of max|out - ref| / max|ref| within the row."""
    err = (out.double() - ref).abs().amax(-1)
    return float((err / ref.abs().amax(-1).clamp_min(1e-30)).max())


def bench_decode(
    shape: Shape,
    batch: int,
    context: int,
    kv_dtype: torch.dtype,
    device: torch.device,
    timer: Timer | None,
    copy_gbps: float | None,
    gen: torch.Generator,
) -> Row:
    """Time and check one paged-decode configuration."""
    import torch

    from promptcache.kernels import paged_decode_attention
    from promptcache.kernels.reference import paged_decode_attention_ref

    name = "fp8" if kv_dtype == torch.float8_e4m3fn else "bf16"
    row = Row("decode", f"{name} batch={batch} ctx={context}")
    block_tables, num_blocks = _block_tables(batch, context, shape.block_size, device, gen)
    cache_shape = (num_blocks, shape.block_size, shape.num_kv_heads, shape.head_dim)
    k_cache = _random_cache(cache_shape, kv_dtype, device)
    v_cache = _random_cache(cache_shape, kv_dtype, device)
    scales: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)
    if kv_dtype == torch.float8_e4m3fn:
        scales = (
            (torch.rand(shape.num_kv_heads, generator=gen) * 0.1 + 0.05).to(device),
            (torch.rand(shape.num_kv_heads, generator=gen) * 0.1 + 0.05).to(device),
        )
    q = torch.randn(batch, shape.num_heads, shape.head_dim, generator=gen).to(
        device, torch.bfloat16
    )
    seq_lens = torch.full((batch,), context, dtype=torch.int32, device=device)
    scale = shape.head_dim**-0.5

    def run() -> torch.Tensor:
        out: torch.Tensor = paged_decode_attention(
            q, k_cache, v_cache, block_tables, seq_lens, scale, *scales
        )
        return out

    out = run()
    err = 0.0
    for i in sorted({0, batch - 1}):
        ref = paged_decode_attention_ref(
            q[i : i + 1], k_cache, v_cache, block_tables[i : i + 1], seq_lens[i : i + 1], scale,
            *scales,
        )  # fmt: skip
        err = max(err, _rows_err(out[i : i + 1], ref))
    row.max_rel_err = err
    row.ok = bool(err <= 1e-2)
    if timer is not None:
        row.ms = timer(run)
        kv_bytes = (
            2 * batch * context * shape.num_kv_heads * shape.head_dim * k_cache.element_size()
        )
        qo_bytes = 2 * q.numel() * q.element_size()
        gbps = (kv_bytes + qo_bytes) / (row.ms * 1e-3) / 1e9
        row.rate = f"{gbps:,.0f} GB/s"
        if copy_gbps:
            row.fraction = gbps / copy_gbps
            if timer.meaningful and batch >= 32 and context >= 4096:
                row.target_met = row.fraction >= DECODE_TARGET
    return row


def bench_extend(
    shape: Shape,
    num_seqs: int,
    prefix_len: int,
    num_new: int,
    device: torch.device,
    timer: Timer | None,
    gen: torch.Generator,
) -> Row:
    """Time and check one extend configuration against SDPA (flash) on the contiguous layout."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right

    from promptcache.kernels import extend_attention

    row = Row("extend", f"bf16 seqs={num_seqs} prefix={prefix_len} new={num_new}")
    dtype = torch.bfloat16
    h, kvh, d, bs = shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.block_size
    total = prefix_len + num_new
    block_tables, num_blocks = _block_tables(num_seqs, max(total, 1), bs, device, gen)
    k_cache = _random_cache((num_blocks, bs, kvh, d), dtype, device)
    v_cache = _random_cache((num_blocks, bs, kvh, d), dtype, device)
    num_tokens = num_seqs * num_new
    q = torch.randn(num_tokens, h, d, generator=gen).to(device, dtype)
    k = torch.randn(num_tokens, kvh, d, generator=gen).to(device, dtype)
    v = torch.randn(num_tokens, kvh, d, generator=gen).to(device, dtype)
    cu = torch.arange(0, num_tokens + 1, num_new, dtype=torch.int32, device=device)
    prefix = torch.full((num_seqs,), prefix_len, dtype=torch.int32, device=device)
    scale = d**-0.5

    def run() -> torch.Tensor:
        out: torch.Tensor = extend_attention(
            q, k, v, k_cache, v_cache, block_tables, cu, prefix, scale, max_seqlen_q=num_new
        )
        return out

    # The same attention on a contiguous [num_seqs, heads, tokens, head_dim] layout for SDPA.
    positions = torch.arange(prefix_len, device=device)
    blocks = block_tables[:, positions // bs].long()
    prefix_k = k_cache[blocks, positions % bs]  # [num_seqs, prefix_len, kvh, d]
    prefix_v = v_cache[blocks, positions % bs]
    full_k = torch.cat([prefix_k, k.view(num_seqs, num_new, kvh, d)], dim=1)
    full_v = torch.cat([prefix_v, v.view(num_seqs, num_new, kvh, d)], dim=1)
    sdpa_q = q.view(num_seqs, num_new, h, d).transpose(1, 2).contiguous()
    sdpa_k = full_k.repeat_interleave(h // kvh, dim=2).transpose(1, 2).contiguous()
    sdpa_v = full_v.repeat_interleave(h // kvh, dim=2).transpose(1, 2).contiguous()
    mask = causal_lower_right(num_new, total)

    def run_sdpa() -> torch.Tensor:
        return F.scaled_dot_product_attention(sdpa_q, sdpa_k, sdpa_v, attn_mask=mask, scale=scale)

    out = run()
    sdpa_out = run_sdpa().transpose(1, 2).reshape(num_tokens, h, d)
    err = max(_rows_err(out, sdpa_out.double()), _extend_tail_err(
        out, q, k, v, k_cache, v_cache, block_tables, prefix_len, num_new, scale))  # fmt: skip
    row.max_rel_err = err
    row.ok = bool(err <= 2e-2)  # bf16 kernel vs bf16 SDPA: both round
    if timer is not None:
        if device.type == "cuda":
            from torch.backends.cuda import SDPAParams, can_use_flash_attention

            params = SDPAParams(sdpa_q, sdpa_k, sdpa_v, None, 0.0, True, False)
            if not can_use_flash_attention(params):
                row.note = "SDPA flash not eligible; baseline is another SDPA backend"
        flops = 4 * h * d * num_seqs * (num_new * prefix_len + num_new * (num_new + 1) / 2)
        row.ms = timer(run)
        sdpa_ms = timer(run_sdpa)
        row.rate = f"{flops / (row.ms * 1e-3) / 1e12:,.1f} TFLOP/s"
        row.fraction = sdpa_ms / row.ms
        if timer.meaningful:
            row.target_met = row.fraction >= EXTEND_TARGET
        row.note = (row.note + f" SDPA {flops / (sdpa_ms * 1e-3) / 1e12:,.1f} TFLOP/s").strip()
    return row


def _extend_tail_err(
    out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    prefix_len: int,
    num_new: int,
    scale: float,
    tail: int = 256,
) -> float:
    """Error of the first sequence's last ``tail`` new tokens against the float64 reference.

    The reference of the whole sequence would need a [heads, n, n] float64 score tensor (tens of
    GiB at n = 16k), so the new tokens before the tail are written into the pool as extra prefix
    (lossless: the pool has the activations' dtype) and the reference attends the tail over it.
    Only pool slots past the first sequence's real prefix change; the timed kernel never reads
    them.
    """
    import torch

    from promptcache.kernels.reference import extend_attention_ref, store_kv_ref

    tail = min(tail, num_new)
    lead = num_new - tail
    bs = k_cache.shape[1]
    positions = torch.arange(prefix_len, prefix_len + lead, device=k.device)
    slots = block_tables[0, positions // bs].long() * bs + positions % bs
    store_kv_ref(k[:lead], v[:lead], k_cache, v_cache, slots)
    rows = slice(lead, num_new)
    cu = torch.tensor([0, tail], dtype=torch.int32, device=k.device)
    prefix = torch.tensor([prefix_len + lead], dtype=torch.int32, device=k.device)
    ref = extend_attention_ref(
        q[rows], k[rows], v[rows], k_cache, v_cache, block_tables[:1], cu, prefix, scale
    )
    return _rows_err(out[rows], ref)


def _kv_bytes(shape: Shape, batch: int, context: int, elem: int) -> int:
    return 2 * batch * context * shape.num_kv_heads * shape.head_dim * elem


def run(check_only: bool, repeats: int, max_kv_gib: float, seed: int) -> Report:
    """Every configuration of one run; check-only uses tiny shapes and one untimed-quality call."""
    import torch

    device = torch.device("cpu" if check_only else "cuda")
    gen = torch.Generator().manual_seed(seed)
    if check_only:
        report = Report(device="cpu, Triton interpreter (check-only: times are meaningless)")
        timer = Timer(device, repeats=1, warmup=0)
        report.copy_gbps, report.matmul_tflops = measure_ceilings(device, timer, 1 << 26, 256)
        shape = CHECK_SHAPE
        batches: tuple[int, ...] = CHECK_DECODE_BATCHES
        contexts: tuple[int, ...] = CHECK_DECODE_CONTEXTS
        extends: tuple[tuple[int, int, int], ...] = CHECK_EXTEND_CONFIGS
    else:
        report = Report(device=torch.cuda.get_device_name(device))
        timer = Timer(device, repeats=repeats, warmup=3)
        report.copy_gbps, report.matmul_tflops = measure_ceilings(device, timer)
        shape, batches, contexts, extends = (
            FULL_SHAPE,
            DECODE_BATCHES,
            DECODE_CONTEXTS,
            EXTEND_CONFIGS,
        )

    for kv_dtype, context, batch in itertools.product(
        (torch.bfloat16, torch.float8_e4m3fn), contexts, batches
    ):
        name = "fp8" if kv_dtype == torch.float8_e4m3fn else "bf16"
        config = f"{name} batch={batch} ctx={context}"
        gib = _kv_bytes(shape, batch, context, kv_dtype.itemsize) / GIB
        if gib > max_kv_gib:
            report.rows.append(
                Row("decode", config, note=f"skipped: KV {gib:.0f} GiB > --max-kv-gib")
            )
            continue
        decode = functools.partial(
            bench_decode, shape, batch, context, kv_dtype, device, timer, report.copy_gbps, gen
        )
        report.rows.append(_guard(decode, "decode", config))
        _release(device)
    for num_seqs, prefix_len, num_new in extends:
        extend = functools.partial(
            bench_extend, shape, num_seqs, prefix_len, num_new, device, timer, gen
        )
        config = f"bf16 seqs={num_seqs} prefix={prefix_len} new={num_new}"
        report.rows.append(_guard(extend, "extend", config))
        _release(device)
    return report


def _guard(fn: Callable[[], Row], kernel: str, config: str) -> Row:
    """Run one configuration; an exception becomes a failed row instead of ending the run."""
    try:
        return fn()
    except Exception as exc:  # one broken config must not hide the others' numbers
        return Row(kernel, config, ok=False, note=f"error: {type(exc).__name__}: {exc}"[:200])


def _release(device: torch.device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()


def format_report(report: Report) -> str:
    """The results as a Markdown table, ceilings first."""
    lines = [f"device: {report.device}"]
    if report.copy_gbps is not None:
        lines.append(f"copy bandwidth: {report.copy_gbps:,.0f} GB/s (read + write)")
        lines.append(f"bf16 matmul: {report.matmul_tflops:,.1f} TFLOP/s")
    lines += [
        "",
        "| kernel | config | ms | rate | vs ceiling | target | max rel err | check | note |",
        "|---|---|---:|---:|---:|---|---:|---|---|",
    ]
    for r in report.rows:
        ms = f"{r.ms:.3f}" if r.ms is not None else "-"
        frac = f"{r.fraction:.2f}" if r.fraction is not None else "-"
        target = {True: "met", False: "MISSED", None: "-"}[r.target_met]
        err = f"{r.max_rel_err:.1e}" if r.max_rel_err is not None else "-"
        check = "ok" if r.ok else "FAIL"
        lines.append(
            f"| {r.kernel} | {r.config} | {ms} | {r.rate or '-'} | {frac} | {target} | {err} "
            f"| {check} | {r.note} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 a check failed, 2 cannot run here)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--check-only",
        action="store_true",
        help="CPU + Triton interpreter, tiny shapes, correctness only (CI)",
    )
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per config (median)")
    parser.add_argument(
        "--max-kv-gib",
        type=float,
        default=48.0,
        help="skip decode configs whose K+V pool exceeds this many GiB",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: fresh)")
    parser.add_argument("--json", dest="json_path", default=None, help="also write rows here")
    args = parser.parse_args(argv)

    if args.check_only:
        os.environ["TRITON_INTERPRET"] = "1"
        if "promptcache.kernels" in sys.modules:
            from promptcache.kernels import runs_on_cpu

            if not runs_on_cpu():
                print("error: promptcache.kernels was imported without TRITON_INTERPRET=1; "
                      "run --check-only in a fresh process", file=sys.stderr)  # fmt: skip
                return 2
    else:
        import torch

        if not torch.cuda.is_available():
            print(
                "error: the full benchmark needs a CUDA GPU and none is visible "
                f"(torch {torch.__version__}); use --check-only for the CPU correctness run",
                file=sys.stderr,
            )
            return 2

    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    started = time.perf_counter()
    report = run(args.check_only, args.repeats, args.max_kv_gib, seed)
    print(format_report(report))
    print(f"\nseed {seed}; {time.perf_counter() - started:.1f} s")
    if args.json_path:
        with open(args.json_path, "w") as f:
            payload: dict[str, Any] = asdict(report)
            payload["seed"] = seed
            json.dump(payload, f, indent=2)
    failed = [r for r in report.rows if not r.ok]
    if failed:
        print(f"{len(failed)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
