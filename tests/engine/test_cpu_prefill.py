"""The fused CPU kernel (engine/cpu_decode) on prefill chunks: causal paged attention over a
cached prefix and the chunk's own keys, a whole forward pass of a mixed batch against a float64
re-implementation of the Llama layers (cpu_kernel_support.py), and SmolLM2's top-1 agreement
with the fp32 model, cold (one 512-token pass) and warm (256 cached + 256 new).

Skipped (with the reason) where the library cannot be built: no C compiler, or no AVX2 / FMA.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch
from cpu_kernel_support import (
    F16_KV,
    INT16_PASS,
    as_stored,
    attention_f64,
    engine_doc_reference,
    paged_attention,
    smollm2_fused,
    token_step_f64,
)
from engine_support import SMOLLM2_MIN_AGREEMENT, batch_metadata

from promptcache.engine import LLM
from promptcache.engine.cpu_decode import CpuDecodeUnavailable, FusedDecode, load_library
from promptcache.engine.cpu_decode.fused import MAX_PASS_ROWS
from promptcache.engine.cpu_decode.library import Dims
from promptcache.engine.cpu_decode.plan import attention_plan


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    try:
        return load_library()
    except CpuDecodeUnavailable as exc:
        pytest.skip(f"the fused CPU kernel cannot be built here: {exc}")


def _tables(
    specs: list[tuple[int, int]], shared: int, gen: torch.Generator, block: int, pool: int
) -> list[list[int]]:
    """Disjoint shuffled block tables for ``(ctx, new)`` sequences, whose first ``shared``
    blocks are common where every one of them is full of cached keys."""
    perm = torch.randperm(pool, generator=gen).tolist()
    common, used, tables = perm[:shared], shared, []
    for ctx, new in specs:
        n = -(-ctx // block)
        mine = min(shared, (ctx - new) // block)
        tables.append(common[:mine] + perm[used : used + n - mine])
        used += n - mine
    return tables


@pytest.mark.parametrize(
    "heads, kv_heads, hd, specs, shared, threads, block",
    [
        (9, 3, 64, [(1088, 64)], 0, 2, 16),  # SmolLM2, the benchmark's warm prefill
        (9, 3, 64, [(300, 300)], 0, 2, 16),  # a cold prefill: tiles of 16, pieces of 32 blocks
        (9, 3, 64, [(1300, 700)], 0, 1, 16),  # keys past one piece for the last tiles
        (8, 4, 16, [(40, 40), (300, 1), (17, 5), (33, 2)], 0, 2, 16),  # mixed; 2 rows x 2 < 8
        (4, 4, 32, [(50, 20)], 0, 3, 16),  # no GQA: a last tile of 4 rows takes the row kernel
        (8, 1, 16, [(70, 70)], 0, 1, 16),  # multi-query: 128 stacked queries a tile
        (9, 3, 64, [(1090, 1), (1060, 1), (1100, 1), (1060, 30)], 64, 2, 16),  # shared + chunk
        # blocks that do not divide the 64-key chunks, or are longer than one (a fresh-user
        # run found wrong logits past 64 keys at block sizes 7, 12, 24, 48 and 80)
        (9, 3, 64, [(300, 300), (200, 1), (201, 1)], 0, 2, 24),
        (8, 4, 16, [(150, 150)], 0, 2, 7),
        (9, 3, 64, [(400, 64), (390, 1), (395, 1)], 4, 2, 80),
        (9, 3, 64, [(200, 100)], 0, 2, 1),
    ],
)
@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.float16])
def test_prefill_attention_matches_float64(
    lib: ctypes.CDLL,
    heads: int,
    kv_heads: int,
    hd: int,
    specs: list[tuple[int, int]],
    shared: int,
    threads: int,
    block: int,
    kv_dtype: torch.dtype,
) -> None:
    """Every new token attends to its sequence's keys up to its own position (causal); an fp16
    pool's values are read exactly (the reference reads the same fp16 values)."""
    gen = torch.Generator().manual_seed(sum(c + n for c, n in specs) + heads + block)
    pool = -(-sum(c for c, _ in specs) // block) + shared + 8
    k_pool = torch.randn(pool, block, kv_heads, hd, generator=gen).to(kv_dtype)
    v_pool = torch.randn(pool, block, kv_heads, hd, generator=gen).to(kv_dtype)
    tables = _tables(specs, shared, gen, block, pool)
    ctxs, news = [c for c, _ in specs], [n for _, n in specs]
    f16 = int(kv_dtype == torch.float16)
    dims = Dims(64, heads, kv_heads, hd, 64, block, 1e-6, hd**-0.5, threads, f16)
    plan = attention_plan(lib, dims, tables, ctxs, news, block, threads, heads, hd)
    if shared:
        assert plan.num_shared_tasks > 0  # the decode rows' common prompt
    rows = sum(news)
    q = torch.randn(rows, heads, hd, generator=gen) * 2
    out = paged_attention(lib, dims, plan, q, k_pool, v_pool, tables)
    row = 0
    for table, ctx, new in zip(tables, ctxs, news, strict=True):
        for i in range(new):
            expected = attention_f64(q[row], k_pool, v_pool, table, ctx - new + i + 1)
            torch.testing.assert_close(out[row].double(), expected, atol=2e-6, rtol=1e-5)
            row += 1


@pytest.mark.parametrize(
    "block, kv_cache_dtype", [(16, "float32"), (24, "float32"), (16, "float16"), (24, "float16")]
)
def test_forward_of_a_mixed_batch_matches_float64_reference(
    lib: ctypes.CDLL, tinystories_dir: Path, block: int, kv_cache_dtype: str
) -> None:
    """One pass over a 37-token chunk after 63 cached tokens, a decode row and a 5-token prompt
    (43 rows: the panel GEMM, int16 activations: ``INT16_PASS``), each token against the
    float64 layers in order; then the same batch keeping only the sequences' last rows, as the
    engine asks for them. An fp16 pool holds the K/V rounded (``F16_KV``), and the reference
    attends to them so rounded."""
    llm = LLM(
        tinystories_dir,
        weight_dtype="int4",
        num_blocks=60,
        block_size=block,
        fused_cpu_decode=True,
        kv_cache_dtype=kv_cache_dtype,
    )
    runner = llm.engine.runner
    fused = runner.fused_decode
    assert isinstance(fused, FusedDecode)
    gen = torch.Generator().manual_seed(7)
    for kv in runner.kv_caches:  # a random history for the cached tokens
        kv.k_cache.copy_(torch.randn(kv.k_cache.shape, generator=gen))
        kv.v_cache.copy_(torch.randn(kv.v_cache.shape, generator=gen))
    before = [(kv.k_cache.clone(), kv.v_cache.clone()) for kv in runner.kv_caches]
    specs = [(100, 37), (17, 1), (5, 5)]  # (ctx, new)
    perm = torch.randperm(60, generator=gen).tolist()
    tables, used = [], 0
    for ctx, _ in specs:
        n = -(-ctx // block)
        tables.append(perm[used : used + n])
        used += n
    tokens = [[(31 * s + 7 * i) % 500 + 3 for i in range(new)] for s, (_, new) in enumerate(specs)]
    positions = [list(range(ctx - new, ctx)) for ctx, new in specs]
    pairs = zip(tables, positions, strict=True)
    slots = [t[p // block] * block + p % block for t, ps in pairs for p in ps]
    meta = batch_metadata(
        "prefill", slots, tables, [c - n for c, n in specs], [n for _, n in specs]
    )
    ids = torch.tensor([t for seq in tokens for t in seq])
    pos = torch.tensor([p for seq in positions for p in seq])
    with torch.inference_mode():
        hidden = fused(ids, pos, meta)
    assert hidden.shape == (43, runner.model_config.hidden_size)
    pools = [(k.double(), v.double()) for k, v in before]
    kv_dtype = runner.kv_dtype
    kv_tol = F16_KV if kv_dtype == torch.float16 else INT16_PASS
    expected_rows = []
    flat = lambda t: t.view(-1, *t.shape[2:])  # noqa: E731  [slots, kv_heads, hd]
    for table, toks, ps in zip(tables, tokens, positions, strict=True):
        for token, p in zip(toks, ps, strict=True):
            expected, new_kv = token_step_f64(fused.model, token, p, pools, table, kv_dtype)
            expected_rows.append(expected)
            slot = table[p // block] * block + p % block
            for (k_pool, v_pool), (k, v), kv in zip(pools, new_kv, runner.kv_caches, strict=True):
                flat(k_pool)[slot] = as_stored(k, kv_dtype)
                flat(v_pool)[slot] = as_stored(v, kv_dtype)
                torch.testing.assert_close(flat(kv.k_cache)[slot].double(), k, **kv_tol)
                torch.testing.assert_close(flat(kv.v_cache)[slot].double(), v, **kv_tol)
    torch.testing.assert_close(hidden.double(), torch.stack(expected_rows), **kv_tol)
    untouched = torch.ones(60 * block, dtype=torch.bool)
    untouched[slots] = False
    for kv, (before_k, before_v) in zip(runner.kv_caches, before, strict=True):
        assert torch.equal(flat(kv.k_cache)[untouched], flat(before_k)[untouched])
        assert torch.equal(flat(kv.v_cache)[untouched], flat(before_v)[untouched])
    last = torch.tensor([36, 37, 42])
    with torch.inference_mode():
        kept = fused(ids, pos, meta, output_rows=last)
    assert kept.shape == (3, runner.model_config.hidden_size)
    expected_kept = torch.stack(expected_rows)[last]
    torch.testing.assert_close(kept.double(), expected_kept, **kv_tol)
    assert fused.steps == 2


def test_a_pass_longer_than_max_pass_rows_matches_float64_reference(
    lib: ctypes.CDLL, tinystories_dir: Path
) -> None:
    """501 rows, more than ``MAX_PASS_ROWS``: a 300-token prompt whose rows are cut between two
    calls of the kernel (the later rows attend to keys the earlier call stored), a decode row and
    a 200-token chunk after 100 cached tokens, each row against the float64 layers; and with only
    the sequences' last rows kept."""
    llm = LLM(
        tinystories_dir,
        weight_dtype="int4",
        num_blocks=60,
        fused_cpu_decode=True,
        kv_cache_dtype="float32",
    )
    runner = llm.engine.runner
    fused = runner.fused_decode
    assert isinstance(fused, FusedDecode)
    gen = torch.Generator().manual_seed(11)
    for kv in runner.kv_caches:  # a random history for the cached tokens
        kv.k_cache.copy_(torch.randn(kv.k_cache.shape, generator=gen))
        kv.v_cache.copy_(torch.randn(kv.v_cache.shape, generator=gen))
    before = [(kv.k_cache.clone(), kv.v_cache.clone()) for kv in runner.kv_caches]
    specs = [(300, 300), (4, 1), (300, 200)]  # (ctx, new)
    rows = sum(n for _, n in specs)
    assert rows > MAX_PASS_ROWS  # two calls: rows 0-250, then 251-500
    perm = torch.randperm(60, generator=gen).tolist()
    tables, used = [], 0
    for ctx, _ in specs:
        n = -(-ctx // 16)
        tables.append(perm[used : used + n])
        used += n
    tokens = [[(13 * s + 5 * i) % 500 + 3 for i in range(new)] for s, (_, new) in enumerate(specs)]
    positions = [list(range(ctx - new, ctx)) for ctx, new in specs]
    slots = [t[p // 16] * 16 + p % 16 for t, ps in zip(tables, positions, strict=True) for p in ps]
    meta = batch_metadata(
        "prefill", slots, tables, [c - n for c, n in specs], [n for _, n in specs]
    )
    ids = torch.tensor([t for seq in tokens for t in seq])
    pos = torch.tensor([p for seq in positions for p in seq])
    with torch.inference_mode():
        hidden = fused(ids, pos, meta)
    assert hidden.shape == (rows, runner.model_config.hidden_size)
    pools = [(k.double(), v.double()) for k, v in before]
    flat = lambda t: t.view(-1, *t.shape[2:])  # noqa: E731  [slots, kv_heads, hd]
    expected_rows = []
    for table, toks, ps in zip(tables, tokens, positions, strict=True):
        for token, p in zip(toks, ps, strict=True):
            expected, new_kv = token_step_f64(fused.model, token, p, pools, table)
            expected_rows.append(expected)
            slot = table[p // 16] * 16 + p % 16
            for (k_pool, v_pool), (k, v), kv in zip(pools, new_kv, runner.kv_caches, strict=True):
                flat(k_pool)[slot], flat(v_pool)[slot] = k, v
                torch.testing.assert_close(flat(kv.k_cache)[slot].double(), k, **INT16_PASS)
                torch.testing.assert_close(flat(kv.v_cache)[slot].double(), v, **INT16_PASS)
    torch.testing.assert_close(hidden.double(), torch.stack(expected_rows), **INT16_PASS)
    last = torch.tensor([299, 300, 500])
    with torch.inference_mode():
        kept = fused(ids, pos, meta, output_rows=last)
    torch.testing.assert_close(kept.double(), torch.stack(expected_rows)[last], **INT16_PASS)
    assert torch.equal(kept, hidden[last])  # each call's kept rows are its rows' own bits


def test_smollm2_prefill_agreement_through_the_kernel(
    lib: ctypes.CDLL, smollm2_gguf: Path, smollm2_llm: LLM
) -> None:
    """512 tokens of docs/engine.md prefilled through the kernel, every row's logits: top-1
    agreement with the fp32 model's, cold (one pass) and warm (the first 256 cached by the cold
    pass, 256 new); the figures are in docs/engine.md ("Fused CPU decode")."""
    ids, reference = engine_doc_reference(smollm2_llm)
    llm, fused = smollm2_fused(smollm2_gguf)
    runner = llm.engine.runner
    table = list(range(32))
    picks = {}
    with torch.inference_mode():
        for name, cached in (("cold", 0), ("warm", 256)):
            new = ids[cached:]
            slots = list(range(cached, 512))
            meta = batch_metadata("prefill", slots, [table], [cached], [len(new)])
            hidden = fused(torch.tensor(new), torch.tensor(range(cached, 512)), meta)
            picks[name] = runner.model.compute_logits(hidden).argmax(-1)
    cold, warm = picks["cold"], picks["warm"]
    assert float((cold == reference).float().mean()) >= SMOLLM2_MIN_AGREEMENT["int4"]
    assert float((warm == reference[256:]).float().mean()) >= SMOLLM2_MIN_AGREEMENT["int4"]
    assert float((warm == cold[256:]).float().mean()) >= 0.99  # only summation order differs
