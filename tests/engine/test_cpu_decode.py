"""The fused CPU kernel (engine/cpu_decode) on decode steps: the C kernels against float64.

The int4 products (row kernels and panels) and the paged decode attention are checked on their
own, then a whole decode step of a real checkpoint (tinystories-656k, int4) against a float64
re-implementation of the Llama layer from the same weights (cpu_kernel_support.py: RMSNorm,
RoPE, GQA softmax attention over the block table, SwiGLU), and finally the engine: the path is
taken, greedy output on SmolLM2 answers the capital question, and every reason it cannot run
is a clear fallback or error. Prefill through the kernel: test_cpu_prefill.py.

Skipped (with the reason) where the library cannot be built: no C compiler, or no AVX2 / FMA.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from cpu_kernel_support import (
    ENGINE_DOC,
    F16_KV,
    INT16_PASS,
    attention_f64,
    engine_doc_reference,
    grid_f64,
    paged_attention,
    smollm2_fused,
    token_step_f64,
    unpack_panels,
    unpack_q4,
)
from engine_support import SMOLLM2_MIN_AGREEMENT, batch_metadata
from torch import nn

from promptcache.engine import LLM, EngineConfig, SamplingParams
from promptcache.engine.cpu_decode import (
    SCRATCH_KEPT_ROWS,
    CpuDecodeUnavailable,
    FusedDecode,
    int8_rows_ranker,
    load_library,
    pack_int4,
    pack_panels,
)
from promptcache.engine.cpu_decode.library import Dims, Q4Weight, build_dir
from promptcache.engine.cpu_decode.plan import attention_plan
from promptcache.engine.models.quant_linear import HEAD_REFINE_TOP, Int4Linear, Int8Linear
from promptcache.errors import ConfigError


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    try:
        return load_library()
    except CpuDecodeUnavailable as exc:
        pytest.skip(f"the fused CPU decode cannot be built here: {exc}")


def _dims(heads: int, kv_heads: int, hd: int, threads: int, kv_f16: bool = False) -> Dims:
    return Dims(64, heads, kv_heads, hd, 64, 16, 1e-6, hd**-0.5, threads, int(kv_f16))


@pytest.mark.parametrize("out_f, in_f", [(16, 32), (960, 576), (48, 1536), (3072, 576)])
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 16, 17, 70])
@pytest.mark.parametrize("vnni", [True, False])
def test_matmul_matches_float64(
    lib: ctypes.CDLL, out_f: int, in_f: int, rows: int, vnni: bool
) -> None:
    """The int4 products (AVX-512 VNNI register tiles where the CPU has them; else AVX2 tiles
    up to 8 rows and the panel GEMM for more), all with int16 activations, on the layer's own
    grid."""
    gen = torch.Generator().manual_seed(out_f + in_f)
    layer = Int4Linear(nn.Linear(in_f, out_f, bias=False))
    qs, dm = pack_int4(layer, lib)
    pq, pdm = pack_panels(qs, dm, lib)
    grid = grid_f64(layer)
    # The kernel's copies hold the layer's own grid (m = zero - 8 scale rounds once in fp32).
    torch.testing.assert_close(unpack_q4(qs, dm), grid, atol=1e-7, rtol=1e-6)
    assert torch.equal(unpack_panels(pq, pdm), unpack_q4(qs, dm))
    with torch.no_grad():
        dense = layer.dense.to_dense() if layer.dense.is_mkldnn else layer.dense
    torch.testing.assert_close(grid, dense.double(), atol=0, rtol=2**-8)  # fp32 or bf16 copy
    x = torch.randn(rows, in_f, generator=gen)
    if x.numel() > 32:
        x[-1, -32:] = 0.0  # a group of zeros (dx = 0)
    y = torch.empty(rows, out_f)
    scratch = torch.empty(lib.pc_matmul_scratch_floats(in_f, rows))
    weight = Q4Weight(qs.data_ptr(), dm.data_ptr(), pq.data_ptr(), pdm.data_ptr(), out_f, in_f)
    dims = _dims(4, 4, 16, 2)
    try:
        lib.pc_set_vnni(int(vnni))
        lib.pc_matmul(
            ctypes.byref(dims),
            ctypes.byref(weight),
            x.data_ptr(),
            y.data_ptr(),
            rows,
            scratch.data_ptr(),
        )
    finally:
        lib.pc_set_vnni(1)
    exact = x.double() @ grid.t()
    scale = (x.double().abs() @ grid.abs().t()).max()
    # int16 activations: per group of 32, dx = max|x| / 32767 and
    # qx = round-half-even(x * (1 / dx)), in fp32 as the kernel computes them.
    groups = x.reshape(rows, in_f // 32, 32)
    dx = groups.abs().amax(-1, keepdim=True) / 32767
    inv = torch.where(dx > 0, 1 / dx, torch.zeros_like(dx))
    qx = torch.round(groups * inv)
    assert qx.abs().max() <= 32767
    x_q = (qx.double() * dx.double()).reshape(rows, in_f)
    assert (y.double() - x_q @ grid.t()).abs().max() <= 1e-6 * scale
    # against the exact product: within half a quantisation step per input
    bound = (dx.double() / 2).expand(-1, -1, 32).reshape(rows, in_f) @ grid.abs().t()
    assert ((y.double() - exact).abs() <= bound * (1 + 1e-6) + 1e-6 * scale).all()
    assert (y.double() - exact).abs().max() > 0  # the activations were quantised


def _pc_matmul(
    lib: ctypes.CDLL, layer_packed: tuple[torch.Tensor, ...], x: torch.Tensor, threads: int
) -> torch.Tensor:
    """``x [rows, in] @ W.T`` by ``pc_matmul`` (the kernel the forward pass picks for that many
    rows) from ``pack_int4``'s and ``pack_panels``' tensors ``(qs, dm, pq, pdm)``."""
    qs, dm, pq, pdm = layer_packed
    rows, in_f = x.shape
    out_f = qs.shape[0]
    y = torch.empty(rows, out_f)
    scratch = torch.empty(lib.pc_matmul_scratch_floats(in_f, rows))
    weight = Q4Weight(qs.data_ptr(), dm.data_ptr(), pq.data_ptr(), pdm.data_ptr(), out_f, in_f)
    dims = _dims(4, 4, 16, threads)
    x = x.contiguous()
    lib.pc_matmul(
        ctypes.byref(dims),
        ctypes.byref(weight),
        x.data_ptr(),
        y.data_ptr(),
        rows,
        scratch.data_ptr(),
    )
    return y


@pytest.mark.parametrize("out_f, in_f", [(48, 64), (960, 576), (64, 1536)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("vnni", [True, False])
def test_a_rows_product_is_the_same_alone_or_among_others(
    lib: ctypes.CDLL, out_f: int, in_f: int, threads: int, vnni: bool
) -> None:
    """Row-invariant numerics: each row's output is bit for bit the one it gets alone (a
    decode step at batch 1), inside products of 2 to 12 rows at every place (a speculative
    verify pass of 1 + k rows, a decode batch): AVX-512 VNNI register tiles of every size up
    to 8 rows where the CPU has it; on AVX2, register tiles of up to 5 rows and the panel GEMM
    past 8, so a verify pass cannot flip a near-tie that plain decoding resolves.
    ``vnni=False`` keeps every product on AVX2 (a CPU without AVX-512 VNNI runs that); with
    ``vnni=True`` on such a CPU both runs take AVX2."""
    gen = torch.Generator().manual_seed(out_f * in_f)
    layer = Int4Linear(nn.Linear(in_f, out_f, bias=False))
    qs, dm = pack_int4(layer, lib)
    packed = (qs, dm, *pack_panels(qs, dm, lib))
    x = torch.randn(13, in_f, generator=gen) * torch.logspace(-3, 2, 13).unsqueeze(1)
    x[4, :32] = 0.0  # a group of zeros (dx = 0)
    try:
        lib.pc_set_vnni(int(vnni))
        alone = torch.cat([_pc_matmul(lib, packed, x[i : i + 1], threads) for i in range(13)])
        for rows in range(2, 13):
            for start in range(13 - rows + 1):
                y = _pc_matmul(lib, packed, x[start : start + rows], threads)
                assert torch.equal(y, alone[start : start + rows]), (rows, start)
        if vnni:  # the AVX2 products (a register tile, the panel GEMM) give the same bits
            lib.pc_set_vnni(0)
            assert torch.equal(_pc_matmul(lib, packed, x[:6], threads), alone[:6])
            assert torch.equal(_pc_matmul(lib, packed, x[:12], threads), alone[:12])
    finally:
        lib.pc_set_vnni(1)


@pytest.mark.parametrize("rows", [64, 67])
def test_a_prefill_products_rows_are_the_same_alone(lib: ctypes.CDLL, rows: int) -> None:
    """The AVX2 panel GEMM at a prefill chunk's row counts (64: a warm request's new tokens, 16
    whole register tiles; 67: a partial last tile) over several panels per thread gives every
    row the bits it gets alone (the register-tile kernel of one row): its per-step sums
    (written in assembly) are the same exact int32 sums."""
    gen = torch.Generator().manual_seed(rows)
    layer = Int4Linear(nn.Linear(576, 960, bias=False))
    qs, dm = pack_int4(layer, lib)
    packed = (qs, dm, *pack_panels(qs, dm, lib))
    x = torch.randn(rows, 576, generator=gen) * torch.logspace(-3, 2, rows).unsqueeze(1)
    x[5, 64:96] = 0.0  # a group of zeros (dx = 0)
    x[7, :32] = 1e4 * torch.sign(x[7, :32])  # a group of int16 extremes (+-32767)
    try:
        lib.pc_set_vnni(0)
        y = _pc_matmul(lib, packed, x, 2)
        alone = torch.cat([_pc_matmul(lib, packed, x[i : i + 1], 1) for i in range(rows)])
        assert torch.equal(y, alone)
    finally:
        lib.pc_set_vnni(1)


@pytest.mark.parametrize(
    "heads, kv_heads, hd, ctxs, shared, threads",
    [
        (9, 3, 64, [1104], 0, 2),  # SmolLM2's shapes at the benchmark's context, split-KV
        (9, 3, 64, [1], 0, 2),  # the first decoded token of an empty history
        (8, 4, 16, [17], 0, 2),  # tinystories: one key into a second block
        (4, 4, 32, [63], 0, 3),  # no GQA; runs that do not divide the blocks
        (10, 2, 128, [300], 0, 1),  # groups of 5 (a full and a partial pass of 4)
        (8, 1, 16, [33], 0, 8),  # multi-query; more runs wanted than blocks
        (9, 3, 64, [1104, 5, 17, 300, 1], 0, 2),  # a batch of rows, each its own length
        (9, 3, 64, [1090, 1060, 1100, 20], 64, 2),  # 3 rows share 64 blocks (one is too short)
        (8, 4, 16, [400, 400, 33], 20, 1),  # 3 rows share 2 blocks (too few), 2 rows 18 more
        (8, 4, 16, [40, 40], 2, 2),  # 1 row x 32 keys saved: below the threshold, own keys
    ],
)
@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.float16])
def test_paged_attention_matches_float64(
    lib: ctypes.CDLL,
    heads: int,
    kv_heads: int,
    hd: int,
    ctxs: list[int],
    shared: int,
    threads: int,
    kv_dtype: torch.dtype,
) -> None:
    """Rows hold the first ``shared`` blocks in common where their length allows. An fp16 pool
    is read as the same values in fp32 (the reference reads its exact values)."""
    gen = torch.Generator().manual_seed(sum(ctxs) + shared)
    block_size, num_blocks = 16, 400
    k_pool = torch.randn(num_blocks, block_size, kv_heads, hd, generator=gen).to(kv_dtype)
    v_pool = torch.randn(num_blocks, block_size, kv_heads, hd, generator=gen).to(kv_dtype)
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    common, used = perm[:shared], shared
    tables = []
    for c in ctxs:
        n = -(-c // block_size)
        mine = min(shared, (c - 1) // block_size)  # a row's newest block is its own
        tables.append(common[:mine] + perm[used : used + n - mine])
        used += n - mine
    dims = _dims(heads, kv_heads, hd, threads, kv_f16=kv_dtype == torch.float16)
    plan = attention_plan(lib, dims, tables, ctxs, [1] * len(ctxs), block_size, threads, heads, hd)
    if shared >= 4:
        assert plan.num_shared_tasks > 0
    q = torch.randn(len(ctxs), heads, hd, generator=gen) * 2
    out = paged_attention(lib, dims, plan, q, k_pool, v_pool, tables)
    for m, c in enumerate(ctxs):
        expected = attention_f64(q[m], k_pool, v_pool, tables[m], c)
        torch.testing.assert_close(out[m].double(), expected, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("kv_cache_dtype", ["float32", "float16"])
@pytest.mark.parametrize("ctxs", [[1], [17], [300], [300, 17, 1, 64]])
def test_decode_step_matches_float64_reference(
    lib: ctypes.CDLL, tinystories_dir: Path, ctxs: list[int], kv_cache_dtype: str
) -> None:
    """One decode step of ``len(ctxs)`` sequences over a random KV history (disjoint blocks):
    int16 activations at every row count (``INT16_PASS``); an fp16 pool holds
    the new K/V rounded to fp16 (``F16_KV``), and the reference attends to them so rounded."""
    llm = LLM(
        tinystories_dir,
        weight_dtype="int4",
        num_blocks=60,
        fused_cpu_decode=True,
        kv_cache_dtype=kv_cache_dtype,
    )
    runner = llm.engine.runner
    assert str(runner.kv_dtype) == f"torch.{kv_cache_dtype}"
    fused = runner.fused_decode
    assert isinstance(fused, FusedDecode)
    gen = torch.Generator().manual_seed(sum(ctxs))
    for kv in runner.kv_caches:  # a random history: attention does not care where K/V came from
        kv.k_cache.copy_(torch.randn(kv.k_cache.shape, generator=gen))
        kv.v_cache.copy_(torch.randn(kv.v_cache.shape, generator=gen))
    pools = [(kv.k_cache.clone(), kv.v_cache.clone()) for kv in runner.kv_caches]
    perm = torch.randperm(60, generator=gen).tolist()
    tables, used = [], 0
    for c in ctxs:
        n = -(-c // 16)
        tables.append(perm[used : used + n])
        used += n
    tokens = [345 + 7 * i for i in range(len(ctxs))]
    slots = [t[(c - 1) // 16] * 16 + (c - 1) % 16 for t, c in zip(tables, ctxs, strict=True)]
    meta = batch_metadata("decode", slots, tables, [c - 1 for c in ctxs], [1] * len(ctxs))
    with torch.inference_mode():
        hidden = fused(torch.tensor(tokens), torch.tensor([c - 1 for c in ctxs]), meta)
    assert hidden.shape == (len(ctxs), runner.model_config.hidden_size)
    hidden_tol = kv_tol = INT16_PASS
    if runner.kv_dtype == torch.float16:
        hidden_tol = kv_tol = F16_KV
    for row, (token, table, ctx, slot) in enumerate(zip(tokens, tables, ctxs, slots, strict=True)):
        expected, new_kv = token_step_f64(
            fused.model, token, ctx - 1, pools, table, runner.kv_dtype
        )
        torch.testing.assert_close(hidden[row].double(), expected, **hidden_tol)
        for kv, (k, v) in zip(runner.kv_caches, new_kv, strict=True):
            flat_k, flat_v = (c.view(-1, *c.shape[2:]) for c in (kv.k_cache, kv.v_cache))
            torch.testing.assert_close(flat_k[slot].double(), k, **kv_tol)
            torch.testing.assert_close(flat_v[slot].double(), v, **kv_tol)
    untouched = torch.ones(60 * 16, dtype=torch.bool)
    untouched[slots] = False
    for kv, (before_k, before_v) in zip(runner.kv_caches, pools, strict=True):
        for after, before in ((kv.k_cache, before_k), (kv.v_cache, before_v)):
            flat_after, flat_before = (c.view(-1, *c.shape[2:]) for c in (after, before))
            assert torch.equal(flat_after[untouched], flat_before[untouched])  # only the slots
    assert fused.steps == 1


def test_rows_that_sample_nothing_share_a_fused_step(
    lib: ctypes.CDLL, tinystories_dir: Path
) -> None:
    """An n = 2 request computes its prompt's last token without sampling (the fork comes after)
    while another sequence decodes: one fused step of two rows, one of which samples."""
    outputs = {}
    for fused in (None, False):
        llm = LLM(tinystories_dir, weight_dtype="int4", fused_cpu_decode=fused)
        engine = llm.engine
        engine.add_request("a", "Once upon a time", SamplingParams(temperature=0, max_tokens=30))
        for _ in range(3):
            engine.step()
        engine.add_request("b", [1, 80], SamplingParams(temperature=0, max_tokens=10, n=2))
        done = {}
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    done[(out.request_id, out.sample_index)] = len(out.output_token_ids)
        outputs[fused] = done
        if fused is None:
            assert engine.runner.fused_decode is not None and engine.runner.fused_decode.steps
    assert outputs[None] == outputs[False] == {("a", 0): 30, ("b", 0): 10, ("b", 1): 10}
    tiny_budget = LLM(tinystories_dir, weight_dtype="int4", max_num_batched_tokens=2)
    params = SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    outs = tiny_budget.generate(["Once upon a time", "The cat", "A dog ran"], params)
    assert [len(o.output_token_ids) for o in outs] == [5, 5, 5]


def test_engine_runs_every_pass_through_the_kernel(lib: ctypes.CDLL, tinystories_dir: Path) -> None:
    """Prefills and decode steps alike take the kernel; its int4 copies replace the dense ones,
    and a second build over the same model (another KV pool) reuses them."""
    llm = LLM(tinystories_dir, weight_dtype="int4")
    fused = llm.engine.runner.fused_decode
    assert isinstance(fused, FusedDecode) and llm.engine.runner.fused_decode_unavailable is None
    assert llm.engine.runner.kv_dtype == torch.float16  # "auto" where the kernel runs
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    one = llm.generate(["Once upon a time"], params)[0]
    assert len(one.output_token_ids) == 12 and fused.steps == 12  # the prefill + 11 steps
    two = llm.generate(["Once upon a time", "The cat sat"], params)
    assert [len(o.output_token_ids) for o in two] == [12, 12]
    assert fused.steps == 24  # one prefill and one decode step for both
    layers = [layer.self_attn.qkv_proj for layer in fused.model.layers]
    assert all(layer.dense is None for layer in layers)
    again = FusedDecode.build(fused.model, llm.engine.runner.kv_caches, torch.device("cpu"))
    assert again.model is fused.model


def test_a_long_calls_scratch_is_freed_when_its_pass_ends(
    lib: ctypes.CDLL, tinystories_dir: Path
) -> None:
    """Calls of more than ``SCRATCH_KEPT_ROWS`` rows take a scratch of their own, freed at the
    end of the pass: the scratch kept between passes is only as large as the short calls'. The
    kept one is freed while a long pass runs and made again, as large, when it ends."""
    llm = LLM(tinystories_dir, weight_dtype="int4")
    fused = llm.engine.runner.fused_decode
    assert isinstance(fused, FusedDecode)
    ids = llm.tokenizer.encode("Once upon a time there was a little cat. " * 40)[:200]
    params = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    [out] = llm.generate([ids], params)
    assert len(out.output_token_ids) == 3
    assert fused._pass_scratch is None
    long_call = lib.pc_scratch_floats(ctypes.byref(fused._dims), SCRATCH_KEPT_ROWS + 1)
    kept = fused._scratch
    assert 0 < kept.numel() < long_call  # the decode steps' (1 row)
    [again] = llm.generate([ids[::-1]], params)
    assert len(again.output_token_ids) == 3
    # the long pass freed the kept scratch and made it again, as large
    assert fused._scratch is not kept and fused._scratch.numel() == kept.numel()
    assert fused._scratch_lent == 0 and fused._pass_scratch is None


def test_smollm2_answers_through_the_kernel(lib: ctypes.CDLL, smollm2_gguf: Path) -> None:
    from gguf_support import CAPITAL_MESSAGES

    llm = LLM(smollm2_gguf, dtype="float32", weight_dtype="int4", kv_cache_bytes=64 * 2**20)
    fused = llm.engine.runner.fused_decode
    assert isinstance(fused, FusedDecode)
    text = llm.tokenizer.apply_chat_template(CAPITAL_MESSAGES, add_generation_prompt=True)
    ids = llm.tokenizer.encode(text, add_special_tokens=False)
    [out] = llm.generate([ids], SamplingParams(temperature=0, max_tokens=16))
    assert out.text == "The capital of France is Paris."
    assert fused.steps >= 6


def test_smollm2_top1_agreement_through_the_kernel(
    lib: ctypes.CDLL, smollm2_gguf: Path, smollm2_llm: LLM
) -> None:
    """Teacher-forced decode, one token a step through the kernel, over 512 positions of
    docs/engine.md: its argmax against the fp32 model's prefill logits (test_quant_linear.py's
    measure for the torch paths; the figure is in docs/engine.md, "Fused CPU decode")."""
    ids, reference = engine_doc_reference(smollm2_llm)
    llm, fused = smollm2_fused(smollm2_gguf)
    runner = llm.engine.runner
    picks = []
    with torch.inference_mode():
        for pos, token in enumerate(ids):
            meta = batch_metadata("decode", [pos], [list(range(pos // 16 + 1))], [pos], [1])
            hidden = fused(torch.tensor([token]), torch.tensor([pos]), meta)
            picks.append(int(runner.model.compute_logits(hidden).argmax(-1)))
    agreement = float((torch.tensor(picks) == reference).float().mean())
    assert agreement >= SMOLLM2_MIN_AGREEMENT["int4"]


@pytest.mark.parametrize("out_f, in_f", [(7, 16), (100, 576), (33, 4112)])
@pytest.mark.parametrize("rows", [1, 3, 8, 9, 17])
def test_int8_rows_product_matches_float64(
    lib: ctypes.CDLL, out_f: int, in_f: int, rows: int
) -> None:
    """``pc_int8_rows_product`` (the head's ranking pass): within the rounding of each row to
    int16 (half a step of ``max |x| / 32767`` per input) of the float64 product, and a row's
    values the same bits alone as among others (4112 inputs: past one int32 chunk)."""
    gen = torch.Generator().manual_seed(out_f + rows)
    q = torch.randint(-127, 128, (out_f, in_f), generator=gen, dtype=torch.int8)
    scale = (torch.rand(out_f, generator=gen) / 50 + 1e-3).bfloat16()
    x = torch.randn(rows, in_f, generator=gen) * 3
    rank = int8_rows_ranker(lib)
    got = rank(x, q, scale)
    w = q.double() * scale.double()[:, None]
    exact = x.double() @ w.t()
    step = x.abs().amax(dim=1, keepdim=True).double() / 32767
    # half a step per input, and a little more: the row's scale and its inverse are fp32
    bound = 0.52 * step * (w.abs().sum(dim=1)[None, :]) + 1e-6 * exact.abs()
    assert bool(((got.double() - exact).abs() <= bound).all())
    for r in (0, rows - 1):
        assert torch.equal(rank(x[r : r + 1].contiguous(), q, scale)[0], got[r])


def test_int8_rows_product_sums_past_int32_exactly(lib: ctypes.CDLL) -> None:
    """Every input at its largest int16 against codes of 127: 8,192 products of 32767 * 127 sum
    to 3.4e10, past int32 (the kernel moves its sums to int64 every 4,096 inputs)."""
    q = torch.full((16, 8192), 127, dtype=torch.int8)
    q[1] = -127
    scale = torch.ones(16, dtype=torch.bfloat16)
    got = int8_rows_ranker(lib)(torch.ones(2, 8192), q, scale)
    assert torch.equal(got[:, 0], torch.full((2,), 127.0 * 8192))
    assert torch.equal(got[:, 1], torch.full((2,), -127.0 * 8192))


def test_smollm2_head_ranks_through_the_kernel(lib: ctypes.CDLL, smollm2_gguf: Path) -> None:
    """The built kernel gives the int8 head its ranking pass (no second copy of the vocabulary
    matrix): over 256 prefill rows of docs/engine.md the argmax and the 20 largest logits are
    the exact int8 head's, every other logit is within 0.05 of its exact value (measured: 0.011
    at most, 0.0006 median; torch's bf16 int8 kernel: 0.22 and 0.021), so the 20 largest
    log-probabilities, normalised over all of them, are within 2e-3 (measured 0.0008)."""
    llm, fused = smollm2_fused(smollm2_gguf)
    head = llm.engine.runner.model.lm_head
    assert isinstance(head, Int8Linear) and head.ranker is not None
    assert head.refine_top == HEAD_REFINE_TOP
    ids = llm.tokenizer.encode(ENGINE_DOC.read_text())[:256]
    meta = batch_metadata("prefill", list(range(256)), [list(range(16))], [0], [256])
    with torch.inference_mode():
        hidden = fused(torch.tensor(ids), torch.arange(256), meta)
        got = head(hidden)
    exact = hidden.double() @ (head.qweight.double() * head.scale_bf16.double()[:, None]).t()
    assert torch.equal(got.argmax(-1), exact.argmax(-1))
    same = (got.topk(20).indices.sort().values == exact.topk(20).indices.sort().values).all(-1)
    assert bool(same.all())
    assert float((got.double() - exact).abs().max()) < 0.05
    top = exact.topk(20).indices
    gap = (got.double().log_softmax(-1) - exact.log_softmax(-1)).gather(1, top).abs().max()
    assert float(gap) < 2e-3


@pytest.mark.parametrize(
    "overrides, reason, conflict",
    [
        ({"weight_dtype": "auto"}, "weight_dtype='int4'", "weight_dtype='auto'"),
        (
            {"weight_dtype": "int4", "kv_cache_dtype": "int8"},
            "kv_cache_dtype='auto'",
            "kv_cache_dtype='int8'",
        ),
    ],
)
def test_falls_back_or_refuses_with_the_reason(
    tinystories_dir: Path, overrides: dict[str, Any], reason: str, conflict: str
) -> None:
    llm = LLM(tinystories_dir, num_blocks=8, **overrides)
    runner = llm.engine.runner
    assert runner.fused_decode is None and reason in (runner.fused_decode_unavailable or "")
    # Required, the same settings are refused by the config, before any model is loaded.
    with pytest.raises(ConfigError, match=r"fused_cpu_decode=True \(--fused-cpu-decode\)") as err:
        EngineConfig(model=str(tinystories_dir), fused_cpu_decode=True, **overrides)
    assert conflict in str(err.value)
    off = LLM(tinystories_dir, num_blocks=8, fused_cpu_decode=False, weight_dtype="int4")
    assert off.engine.runner.fused_decode is None
    assert off.engine.runner.fused_decode_unavailable is None
    assert off.engine.runner.kv_dtype == torch.float32  # "auto": the model's, off the kernel


def test_required_but_unavailable_at_load_is_a_config_error(
    tinystories_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(ConfigError, match=r"\(--fused-cpu-decode\) cannot run: .*no-such-cc"):
        LLM(tinystories_dir, weight_dtype="int4", num_blocks=8, fused_cpu_decode=True)


def test_without_a_compiler_the_engine_falls_back(
    tinystories_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("PROMPTCACHE_CPU_DECODE_DIR", str(tmp_path / "build"))
    llm = LLM(tinystories_dir, weight_dtype="int4", num_blocks=8)
    assert llm.engine.runner.fused_decode is None
    assert "does not run" in (llm.engine.runner.fused_decode_unavailable or "")
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    assert len(llm.generate(["Once"], params)[0].output_token_ids) == 4


@pytest.mark.parametrize("fake", ["true", "echo"])
def test_a_compiler_that_writes_nothing_is_a_fallback_reason(
    lib: ctypes.CDLL, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: str
) -> None:
    """A "compiler" that exits 0 without output leaves no file behind to be loaded later."""
    monkeypatch.setenv("CC", fake)
    monkeypatch.setenv("PROMPTCACHE_CPU_DECODE_DIR", str(tmp_path))
    with pytest.raises(CpuDecodeUnavailable, match=r"wrote no shared library|printed no version"):
        load_library()
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_cached_library_is_built_again(
    lib: ctypes.CDLL, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A truncated cached file is rebuilt, not loaded (dlopen of one can die of SIGBUS)."""
    monkeypatch.setenv("PROMPTCACHE_CPU_DECODE_DIR", str(tmp_path / "good"))
    load_library()
    [good] = (tmp_path / "good").glob("decode_step-*.so")
    damaged = tmp_path / "damaged" / good.name
    damaged.parent.mkdir()
    damaged.write_bytes(good.read_bytes()[:4096])
    monkeypatch.setenv("PROMPTCACHE_CPU_DECODE_DIR", str(damaged.parent))
    load_library()
    assert damaged.read_bytes() == good.read_bytes()  # the same build, complete again
    assert damaged.stat().st_mode & 0o777 == 0o755


def test_cc_may_carry_arguments(
    lib: ctypes.CDLL, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no gcc or cc on PATH")
    monkeypatch.setenv("CC", f"{compiler} -DPROMPTCACHE_CC_TEST=1")
    monkeypatch.setenv("PROMPTCACHE_CPU_DECODE_DIR", str(tmp_path))
    assert load_library().pc_cpu_supported() == 1
    assert len(list(tmp_path.glob("decode_step-*.so"))) == 1


def test_library_is_built_once_and_shares_torchs_openmp(
    lib: ctypes.CDLL, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROMPTCACHE_CPU_DECODE_DIR", str(tmp_path))
    assert build_dir() == tmp_path
    load_library()
    built = list(tmp_path.glob("decode_step-*.so"))
    assert len(built) == 1
    mtime = built[0].stat().st_mtime_ns
    load_library()
    assert [p.stat().st_mtime_ns for p in tmp_path.glob("decode_step-*.so")] == [mtime]
    with open("/proc/self/maps", encoding="ascii") as maps:
        runtimes = {line.split()[-1] for line in maps if "libgomp" in line}
    assert len(runtimes) == 1, runtimes


def test_loading_the_library_keeps_subnormal_floats(lib: ctypes.CDLL) -> None:
    """Built with -ffast-math but not linked with it: no flush-to-zero for the whole process."""
    smallest = sys.float_info.min
    assert smallest / 2 > 0  # a subnormal double survives in Python
    tiny = torch.tensor([1e-40])  # a subnormal float32
    assert (tiny * 1.0).item() > 0


def test_config_takes_only_none_or_a_bool() -> None:
    with pytest.raises(ConfigError, match="fused_cpu_decode must be None"):
        EngineConfig(fused_cpu_decode=1)  # type: ignore[arg-type]
