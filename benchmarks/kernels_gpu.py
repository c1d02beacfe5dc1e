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
   last sequence of each batch) and extend also against SDPA; a failed check fails the run;
5. with ``--engine-model DIR`` (a Llama checkpoint such as ``../shared/models/tinystories-656k``):
   the engine end to end on the ``triton`` backend on the GPU. Its float32 greedy tokens must equal
   the ``torch`` backend's on the CPU (a failed check); bf16 weights and an fp8 KV pool on the GPU
   are compared with the torch backend in the same dtype on the GPU, and their agreement (tokens
   equal, out of tokens generated) is reported, not judged, since the two backends round
   differently. The prompts cover plain prefill, chunked prefill, prefill after a prefix-cache hit
   and batched decode.

Timing: CUDA events around each call, a 256 MiB write between calls so no data stays in L2, the
median of ``--repeats`` calls after warm-up.

Usage::

    python benchmarks/kernels_gpu.py                  # needs CUDA; prints the table
    python benchmarks/kernels_gpu.py --json out.json  # also writes every row
    python benchmarks/kernels_gpu.py --check-only     # CPU, Triton interpreter, tiny shapes (CI)
    python benchmarks/kernels_gpu.py --engine-model ../shared/models/tinystories-656k
    python benchmarks/kernels_gpu.py --sweep all --json sweep.json  # launch configurations

``--sweep all`` (or ``decode`` / ``extend``) times every launch configuration that
`_sweep_launches` lists (:class:`promptcache.kernels.LaunchConfig`: tile sizes, warps, pipeline
stages, paged decode's split target) on a few shapes (`SWEEP_DECODE`, `SWEEP_EXTEND`), checks
each result against the float64 reference, and prints per shape the default's time and the
fastest configurations; the kernels' defaults are chosen from it. With ``--check-only`` it runs
a few configurations on tiny shapes under the interpreter.

``--check-only`` sets ``TRITON_INTERPRET=1`` itself and runs the same code paths on tiny shapes
on the CPU (its times are interpreter times and mean nothing; targets are not judged; the engine
section runs its float32 comparison only, with the interpreter's CPU kernels); it exits 1 if any
check fails. Without ``--check-only`` and without CUDA the script exits 2 and says so.
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

# Launch sweep: (batch, context) per KV dtype, and (num_seqs, prefix_len, new tokens).
SWEEP_DECODE = ((32, 4096), (256, 4096), (64, 16384), (4, 131072), (64, 131072))
SWEEP_EXTEND = ((1, 0, 16384), (8, 0, 1024), (16, 2048, 512), (4, 8192, 1024))
CHECK_SWEEP_DECODE = ((3, 300),)
CHECK_SWEEP_EXTEND = ((2, 37, 9),)

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


ENGINE_PREFIX = (
    "Lily and Tom went to the park. They saw a big tree with red apples. Tom wanted to climb it, "
    "but Lily said"
)
ENGINE_CALLS = (
    (ENGINE_PREFIX, "Once upon a time"),
    (ENGINE_PREFIX + " no, it is too high.", "The little dog"),  # a prefix-cache hit
)
ENGINE_MAX_TOKENS = 16


def engine_greedy_ids(
    model: str, device: str, backend: str, dtype: str, kv_cache_dtype: str = "auto"
) -> list[list[int]]:
    """Greedy output token ids of every prompt of `ENGINE_CALLS`, one ``generate`` call per tuple.

    A 16-token step budget splits the 21-token prompt into two prefill chunks; the second call's
    first prompt extends the first call's, so its prefill starts after a prefix-cache hit.

    Raises:
        RuntimeError: the second call found nothing in the prefix cache.
    """
    from promptcache.engine import LLM, SamplingParams

    params = SamplingParams(temperature=0, max_tokens=ENGINE_MAX_TOKENS, ignore_eos=True)
    llm = LLM(
        model=model,
        device=device,
        attention_backend=backend,
        dtype=dtype,
        kv_cache_dtype=kv_cache_dtype,
        fused_cpu_decode=False,
        block_size=8,
        max_num_batched_tokens=16,
    )
    ids: list[list[int]] = []
    for call, prompts in enumerate(ENGINE_CALLS):
        outputs = llm.generate(list(prompts), params)
        if call == 1 and outputs[0].num_cached_tokens == 0:
            raise RuntimeError("the second call should have hit the prefix cache")
        ids += [list(out.output_token_ids) for out in outputs]
    return ids


def _agreement(got: list[list[int]], expected: list[list[int]]) -> tuple[int, int]:
    """(tokens equal up to each prompt's first difference, tokens generated)."""
    equal = 0
    for g, e in zip(got, expected, strict=True):
        for a, b in zip(g, e, strict=True):
            if a != b:
                break
            equal += 1
    return equal, sum(len(e) for e in expected)


def bench_engine(model: str, check_only: bool) -> list[Row]:
    """The engine on the triton backend against the torch backend (see the module docstring)."""
    device = "cpu" if check_only else "cuda"
    rows = []
    expected = engine_greedy_ids(model, "cpu", "torch", "float32")
    row = Row("engine", f"float32 triton on {device} vs torch on cpu")
    got = engine_greedy_ids(model, device, "triton", "float32")
    equal, total = _agreement(got, expected)
    row.ok = got == expected
    row.note = f"greedy tokens equal: {equal} of {total}"
    rows.append(row)
    if check_only:
        return rows
    for dtype, kv in (("bfloat16", "auto"), ("bfloat16", "fp8")):
        row = Row("engine", f"{dtype} kv={kv} triton vs torch, both on cuda")
        ref = engine_greedy_ids(model, "cuda", "torch", dtype, kv)
        got = engine_greedy_ids(model, "cuda", "triton", dtype, kv)
        equal, total = _agreement(got, ref)
        row.note = f"greedy tokens equal: {equal} of {total} (reported, not judged)"
        rows.append(row)
    return rows


def _sweep_launches(check_only: bool) -> tuple[list[Any], list[Any]]:
    """(decode launches, extend launches) to try; the defaults come first."""
    from promptcache.kernels import LaunchConfig
    from promptcache.kernels.launch import DECODE_LAUNCH, EXTEND_LAUNCH

    if check_only:
        decode = [DECODE_LAUNCH, LaunchConfig(block_n=32, num_warps=4, num_stages=2,
                                              programs_per_sm=8)]  # fmt: skip
        extend = [EXTEND_LAUNCH, LaunchConfig(block_n=32, num_warps=4, num_stages=2, block_m=32)]
        return decode, extend
    decode = [DECODE_LAUNCH] + [
        LaunchConfig(block_n=bn, num_warps=w, num_stages=st, programs_per_sm=ppsm)
        for bn, w, st, ppsm in itertools.product((32, 64, 128), (4, 8), (2, 3, 4), (2, 8))
    ]
    extend = [EXTEND_LAUNCH] + [
        LaunchConfig(block_n=bn, num_warps=w, num_stages=st, block_m=bm)
        for bm, bn, w, st in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3, 4))
    ]
    return list(dict.fromkeys(decode)), list(dict.fromkeys(extend))


@dataclass
class SweepRow:
    """One launch configuration on one shape."""

    kernel: str
    config: str
    launch: dict[str, int]
    ms: float | None = None
    max_rel_err: float | None = None
    ok: bool = True
    note: str = ""


def sweep(
    shape: Shape,
    decode_shapes: tuple[tuple[int, int], ...],
    extend_shapes: tuple[tuple[int, int, int], ...],
    device: torch.device,
    timer: Timer,
    gen: torch.Generator,
    kernels: tuple[str, ...] = ("decode", "extend"),
) -> list[SweepRow]:
    """Time every launch configuration of `_sweep_launches` on each shape; check each result."""
    import torch

    from promptcache.kernels import extend_attention, paged_decode_attention
    from promptcache.kernels.reference import paged_decode_attention_ref

    check_only = not timer.meaningful
    decode_launches, extend_launches = _sweep_launches(check_only)
    rows: list[SweepRow] = []

    def one(kernel: str, config: str, launch: Any, call: Callable[[], Any],
            err_of: Callable[[Any], float], tol: float) -> None:  # fmt: skip
        row = SweepRow(kernel, config, asdict(launch))
        try:
            row.max_rel_err = err_of(call())
            row.ok = row.max_rel_err <= tol
            row.ms = timer(call)
        except Exception as exc:  # a launch the chip cannot run (shared memory) is a result
            row.ok = False
            row.note = f"error: {type(exc).__name__}: {exc}"[:160]
        rows.append(row)

    if "decode" not in kernels:
        decode_shapes = ()
    if "extend" not in kernels:
        extend_shapes = ()
    for kv_dtype in (torch.bfloat16, torch.float8_e4m3fn):
        name = "fp8" if kv_dtype == torch.float8_e4m3fn else "bf16"
        for batch, context in decode_shapes:
            block_tables, num_blocks = _block_tables(batch, context, shape.block_size, device, gen)
            cache_shape = (num_blocks, shape.block_size, shape.num_kv_heads, shape.head_dim)
            k_cache = _random_cache(cache_shape, kv_dtype, device)
            v_cache = _random_cache(cache_shape, kv_dtype, device)
            scales: tuple[Any, Any] = (None, None)
            if kv_dtype == torch.float8_e4m3fn:
                scales = tuple(
                    (torch.rand(shape.num_kv_heads, generator=gen) * 0.1 + 0.05).to(device)
                    for _ in range(2)
                )
            q = torch.randn(batch, shape.num_heads, shape.head_dim, generator=gen).to(
                device, torch.bfloat16
            )
            seq_lens = torch.full((batch,), context, dtype=torch.int32, device=device)
            scale = shape.head_dim**-0.5
            ends = sorted({0, batch - 1})
            refs = [
                paged_decode_attention_ref(
                    q[i : i + 1],
                    k_cache,
                    v_cache,
                    block_tables[i : i + 1],
                    seq_lens[i : i + 1],
                    scale,
                    *scales,
                )
                for i in ends
            ]

            def decode_err(out: Any, refs: list[Any] = refs, ends: list[int] = ends) -> float:
                return max(_rows_err(out[i : i + 1], r) for i, r in zip(ends, refs, strict=True))

            for launch in decode_launches:
                call = functools.partial(
                    paged_decode_attention, q, k_cache, v_cache, block_tables, seq_lens, scale,
                    *scales, launch=launch,
                )  # fmt: skip
                one("decode", f"{name} batch={batch} ctx={context}", launch, call, decode_err,
                    1e-2)  # fmt: skip
            del k_cache, v_cache
            _release(device)

    h, kvh, d, bs = shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.block_size
    for num_seqs, prefix_len, num_new in extend_shapes:
        total = prefix_len + num_new
        block_tables, num_blocks = _block_tables(num_seqs, max(total, 1), bs, device, gen)
        k_cache = _random_cache((num_blocks, bs, kvh, d), torch.bfloat16, device)
        v_cache = _random_cache((num_blocks, bs, kvh, d), torch.bfloat16, device)
        num_tokens = num_seqs * num_new
        q = torch.randn(num_tokens, h, d, generator=gen).to(device, torch.bfloat16)
        k = torch.randn(num_tokens, kvh, d, generator=gen).to(device, torch.bfloat16)
        v = torch.randn(num_tokens, kvh, d, generator=gen).to(device, torch.bfloat16)
        cu = torch.arange(0, num_tokens + 1, num_new, dtype=torch.int32, device=device)
        prefix = torch.full((num_seqs,), prefix_len, dtype=torch.int32, device=device)
        scale = d**-0.5
        # The reference rows: the first sequence's last new tokens (see _extend_tail_err),
        # computed on a copy of the pool so the timed calls read the pool as given.
        k_ref_cache, v_ref_cache = k_cache.clone(), v_cache.clone()

        def extend_err(
            out: Any,
            args: tuple[Any, ...] = (
                q,
                k,
                v,
                k_ref_cache,
                v_ref_cache,
                block_tables,
                prefix_len,
                num_new,
                scale,
            ),
        ) -> float:
            return _extend_tail_err(out, *args, tail=64)

        for launch in extend_launches:
            call = functools.partial(
                extend_attention, q, k, v, k_cache, v_cache, block_tables, cu, prefix, scale,
                max_seqlen_q=num_new, launch=launch,
            )  # fmt: skip
            one("extend", f"bf16 seqs={num_seqs} prefix={prefix_len} new={num_new}", launch,
                call, extend_err, 2e-2)  # fmt: skip
        del k_cache, v_cache, k_ref_cache, v_ref_cache
        _release(device)
    return rows


def format_sweep(rows: list[SweepRow], top: int = 5) -> str:
    """Per shape: the default launch (first row) and the ``top`` fastest that passed."""
    lines = [
        "| kernel | config | launch | ms | vs default | max rel err |",
        "|---|---|---|---:|---:|---:|",
    ]
    shapes = dict.fromkeys((r.kernel, r.config) for r in rows)
    failed = [r for r in rows if not r.ok]
    for kernel, config in shapes:
        group = [r for r in rows if (r.kernel, r.config) == (kernel, config)]
        default = group[0]
        passed = sorted((r for r in group if r.ok and r.ms is not None), key=lambda r: r.ms or 0)
        for i, r in enumerate([default] + [r for r in passed[:top] if r is not default]):
            unused = "block_m" if kernel == "decode" else "programs_per_sm"
            launch = " ".join(f"{k}={v}" for k, v in r.launch.items() if k != unused)
            ms = f"{r.ms:.3f}" if r.ms is not None else "-"
            ratio = f"{r.ms / default.ms:.2f}" if r.ms and default.ms else "-"
            err = f"{r.max_rel_err:.1e}" if r.max_rel_err is not None else "-"
            label = "default: " if i == 0 else ""
            lines.append(f"| {kernel} | {config} | {label}{launch} | {ms} | {ratio} | {err} |")
    lines.append(f"\n{len(rows)} runs, {len(failed)} failed or errored")
    for r in failed[:20]:
        lines.append(f"failed: {r.kernel} {r.config} {r.launch}: err {r.max_rel_err} {r.note}")
    return "\n".join(lines)


def _kv_bytes(shape: Shape, batch: int, context: int, elem: int) -> int:
    return 2 * batch * context * shape.num_kv_heads * shape.head_dim * elem


def run(
    check_only: bool, repeats: int, max_kv_gib: float, seed: int, engine_model: str | None = None
) -> Report:
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
    if engine_model is not None:
        try:
            report.rows += bench_engine(engine_model, check_only)
        except Exception as exc:  # the kernel rows above must still be printed
            note = f"error: {type(exc).__name__}: {exc}"[:300]
            report.rows.append(Row("engine", "triton backend", ok=False, note=note))
    return report


def _guard(fn: Callable[[], Row], kernel: str, config: str) -> Row:
    """Run one configuration; an exception becomes a failed row instead of ending the run.

    Each row is also printed to stderr as it finishes, so a run stopped by a time limit still
    shows what it measured.
    """
    try:
        row = fn()
    except Exception as exc:  # one broken config must not hide the others' numbers
        row = Row(kernel, config, ok=False, note=f"error: {type(exc).__name__}: {exc}"[:200])
    ms = f"{row.ms:.3f} ms" if row.ms is not None else "-"
    check = "ok" if row.ok else "FAIL"
    print(f"done: {kernel} {config}: {ms} {row.rate} {check} {row.note}", file=sys.stderr,
          flush=True)  # fmt: skip
    return row


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


def _run_sweep(
    check_only: bool, repeats: int, seed: int, json_path: str | None, kernels: tuple[str, ...]
) -> int:
    """``--sweep``: print the launch table; 1 if the default launch failed a check anywhere."""
    import torch

    started = time.perf_counter()
    device = torch.device("cpu" if check_only else "cuda")
    gen = torch.Generator().manual_seed(seed)
    if check_only:
        timer = Timer(device, repeats=1, warmup=0)
        shapes = (CHECK_SHAPE, CHECK_SWEEP_DECODE, CHECK_SWEEP_EXTEND)
    else:
        timer = Timer(device, repeats=repeats, warmup=3)
        shapes = (FULL_SHAPE, SWEEP_DECODE, SWEEP_EXTEND)
    rows = sweep(*shapes, device, timer, gen, kernels)
    print(format_sweep(rows))
    print(f"\nseed {seed}; {time.perf_counter() - started:.1f} s")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"seed": seed, "rows": [asdict(r) for r in rows]}, f, indent=2)
    bad = [r for r in rows if not r.ok and r.note == ""]  # wrong results, not launch errors
    if bad:
        print(f"{len(bad)} launch(es) gave a wrong result", file=sys.stderr)
        return 1
    return 0


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
    parser.add_argument(
        "--sweep",
        choices=("all", "decode", "extend"),
        default=None,
        help="time every launch configuration of these kernels on a few shapes instead of "
        "the benchmark",
    )
    parser.add_argument(
        "--engine-model",
        default=None,
        help="also run the engine on the triton backend with this checkpoint directory",
    )
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
    if args.engine_model is not None and not os.path.isdir(args.engine_model):
        print(f"error: --engine-model {args.engine_model!r} is not a directory", file=sys.stderr)
        return 2
    if args.sweep:
        kernels = ("decode", "extend") if args.sweep == "all" else (args.sweep,)
        return _run_sweep(args.check_only, args.repeats, seed, args.json_path, kernels)
    report = run(args.check_only, args.repeats, args.max_kv_gib, seed, args.engine_model)
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
