"""The fused CPU decode (engine/cpu_decode): the C kernels against float64 references.

The int4 matrix-vector product and the paged attention are checked on their own, then a whole
decode step of a real checkpoint (tinystories-656k, int4) against a float64 re-implementation
of the Llama layer written here from the same weights (RMSNorm, RoPE, GQA softmax attention over
the block table, SwiGLU), and finally the engine: the path is taken, greedy output on SmolLM2
answers the capital question, and every reason it cannot run is a clear fallback or error.

Skipped (with the reason) where the library cannot be built: no C compiler, or no AVX2 / FMA.
"""

from __future__ import annotations

import ctypes
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_support import SMOLLM2_MIN_AGREEMENT, batch_metadata, prefill_logits
from torch import nn

from promptcache.engine import LLM, EngineConfig, SamplingParams
from promptcache.engine.cpu_decode import CpuDecodeUnavailable, FusedDecode, load_library, pack_int4
from promptcache.engine.cpu_decode.library import Dims, Q4Weight, build_dir
from promptcache.engine.cpu_decode.plan import attention_plan
from promptcache.engine.models.quant_linear import Int4Linear
from promptcache.errors import ConfigError


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    try:
        return load_library()
    except CpuDecodeUnavailable as exc:
        pytest.skip(f"the fused CPU decode cannot be built here: {exc}")


def _grid_f64(layer: Int4Linear) -> torch.Tensor:
    """float64 ``[out, in]``: the layer's grid ``(q - 8) * scale + zero``, ``q`` read back from
    its dense copy with torch ops (independent of the C packer)."""
    dense = layer.dense.to_dense() if layer.dense.is_mkldnn else layer.dense
    out_f, in_f = dense.shape
    sz = layer.scales_and_zeros.double()  # [in / 32, out, 2]
    scale, zero = (sz[..., i].t()[..., None] for i in (0, 1))  # [out, in / 32, 1]
    q = torch.round((dense.double().view(out_f, in_f // 32, 32) - zero) / scale) + 8
    return ((q.clamp(0, 15) - 8) * scale + zero).view(out_f, in_f)


def _unpack(qs: torch.Tensor, dm: torch.Tensor) -> torch.Tensor:
    """float64 ``[out, in]`` from the kernel's layout, decoded independently of the C code."""
    out_f, half = qs.shape
    groups = qs.view(out_f, half // 16, 16)
    q = torch.stack([groups & 15, groups >> 4], dim=-2).view(out_f, half // 16, 32).double()
    return (q * dm[..., :1].double() + dm[..., 1:].double()).view(out_f, 2 * half)


@pytest.mark.parametrize("out_f, in_f", [(16, 32), (960, 576), (48, 1536), (3072, 576)])
@pytest.mark.parametrize("rows", [1, 2, 3, 17])
def test_q4_matmul_matches_float64(lib: ctypes.CDLL, out_f: int, in_f: int, rows: int) -> None:
    """One row takes the matrix-vector kernel, more the GEMM (pairs of rows, then a last one)."""
    gen = torch.Generator().manual_seed(out_f + in_f)
    layer = Int4Linear(nn.Linear(in_f, out_f, bias=False))
    qs, dm = pack_int4(layer, lib)
    grid = _grid_f64(layer)
    # The kernel's copy holds the layer's own grid (m = zero - 8 scale rounds once in fp32).
    torch.testing.assert_close(_unpack(qs, dm), grid, atol=1e-7, rtol=1e-6)
    with torch.no_grad():
        dense = layer.dense.to_dense() if layer.dense.is_mkldnn else layer.dense
    torch.testing.assert_close(grid, dense.double(), atol=0, rtol=2**-8)  # fp32 or bf16 copy
    x = torch.randn(rows, in_f, generator=gen)
    y = torch.empty(rows, out_f)
    xsum = torch.empty(in_f // 32 + 1)
    weight = Q4Weight(qs.data_ptr(), dm.data_ptr(), out_f, in_f)
    lib.pc_q4_matmul(ctypes.byref(weight), x.data_ptr(), y.data_ptr(), rows, xsum.data_ptr(), 2)
    expected = x.double() @ grid.t()
    scale = (x.double().abs() @ grid.abs().t()).max()
    assert (y.double() - expected).abs().max() <= 1e-6 * scale


def _attention_f64(
    q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, table: list[int], ctx: int
) -> torch.Tensor:
    """float64 softmax attention of ``q [heads, hd]`` over the first ``ctx`` table keys."""
    heads, hd = q.shape
    kv_heads = k_pool.shape[2]
    rows = torch.tensor(table).repeat_interleave(k_pool.shape[1]) * k_pool.shape[1]
    rows = (rows + torch.arange(len(rows)) % k_pool.shape[1])[:ctx]
    k = k_pool.reshape(-1, kv_heads, hd)[rows].double()  # [ctx, kv_heads, hd]
    v = v_pool.reshape(-1, kv_heads, hd)[rows].double()
    group = heads // kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = torch.einsum("hd,chd->hc", q.double(), k) / math.sqrt(hd)
    return torch.einsum("hc,chd->hd", scores.softmax(-1), v)


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
def test_paged_attention_matches_float64(
    lib: ctypes.CDLL,
    heads: int,
    kv_heads: int,
    hd: int,
    ctxs: list[int],
    shared: int,
    threads: int,
) -> None:
    """Rows hold the first ``shared`` blocks in common where their length allows."""
    gen = torch.Generator().manual_seed(sum(ctxs) + shared)
    block_size, num_blocks = 16, 400
    k_pool = torch.randn(num_blocks, block_size, kv_heads, hd, generator=gen)
    v_pool = torch.randn(num_blocks, block_size, kv_heads, hd, generator=gen)
    perm = torch.randperm(num_blocks, generator=gen).tolist()
    common, used = perm[:shared], shared
    tables = []
    for c in ctxs:
        n = -(-c // block_size)
        mine = min(shared, (c - 1) // block_size)  # a row's newest block is its own
        tables.append(common[:mine] + perm[used : used + n - mine])
        used += n - mine
    width = max(len(t) for t in tables)
    dims = Dims(64, heads, kv_heads, hd, 64, block_size, 1e-6, hd**-0.5, threads)
    plan = attention_plan(lib, dims, tables, ctxs, block_size, threads, heads, hd)
    if shared >= 4:
        assert plan.num_shared_tasks > 0
    q = torch.randn(len(ctxs), heads, hd, generator=gen) * 2
    work = torch.empty(plan.scratch_floats)
    out = torch.empty(len(ctxs), heads, hd)
    tables_t = torch.tensor([t + [-1] * (width - len(t)) for t in tables], dtype=torch.int32)
    lib.pc_paged_attention(
        ctypes.byref(dims),
        len(ctxs),
        q.data_ptr(),
        k_pool.data_ptr(),
        v_pool.data_ptr(),
        tables_t.data_ptr(),
        width,
        ctypes.byref(plan.struct),
        out.data_ptr(),
        work.data_ptr(),
    )
    for m, c in enumerate(ctxs):
        expected = _attention_f64(q[m], k_pool, v_pool, tables[m], c)
        torch.testing.assert_close(out[m].double(), expected, atol=2e-6, rtol=1e-5)


def _rms_f64(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight.double() * (x / torch.sqrt(x.pow(2).mean() + eps))


def _rope_f64(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' ``x * cos + rotate_half(x) * sin`` for ``x [heads, hd]``."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[:, half:], x[:, :half]], dim=-1)
    return x * cos + rotated * sin


def _decode_step_f64(
    fused: FusedDecode,
    token: int,
    position: int,
    pools: list[tuple[torch.Tensor, torch.Tensor]],
    table: list[int],
    ctx: int,
) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """The Llama decode step in float64 from the layers' int4 grids: (hidden [hidden], new K/V)."""
    model = fused.model
    cfg = model.config
    heads, kv_heads, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    x = model.embed_tokens(torch.tensor([token])).double().view(-1)
    inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    angles = torch.cat([position * inv_freq] * 2)
    cos, sin = angles.cos(), angles.sin()
    new_kv = []
    slot_block, slot_off = table[(ctx - 1) // 16], (ctx - 1) % 16
    for layer, (k_pool, v_pool) in zip(model.layers, pools, strict=True):
        attn, mlp = layer.self_attn, layer.mlp
        h = _rms_f64(x, layer.input_layernorm.weight, cfg.rms_norm_eps)
        qkv = _grid_f64(attn.qkv_proj) @ h
        q = _rope_f64(qkv[: heads * hd].view(heads, hd), cos, sin)
        k = _rope_f64(qkv[heads * hd : (heads + kv_heads) * hd].view(kv_heads, hd), cos, sin)
        v = qkv[(heads + kv_heads) * hd :].view(kv_heads, hd)
        k_pool, v_pool = k_pool.double().clone(), v_pool.double().clone()
        k_pool[slot_block, slot_off], v_pool[slot_block, slot_off] = k, v
        new_kv.append((k, v))
        o = _attention_f64(q, k_pool, v_pool, table, ctx).reshape(-1)
        x = x + _grid_f64(attn.o_proj) @ o
        h = _rms_f64(x, layer.post_attention_layernorm.weight, cfg.rms_norm_eps)
        gate, up = (_grid_f64(mlp.gate_up_proj) @ h).chunk(2)
        x = x + _grid_f64(mlp.down_proj) @ (torch.nn.functional.silu(gate) * up)
    return _rms_f64(x, model.norm.weight, cfg.rms_norm_eps), new_kv


@pytest.mark.parametrize("ctxs", [[1], [17], [300], [300, 17, 1, 64]])
def test_decode_step_matches_float64_reference(
    lib: ctypes.CDLL, tinystories_dir: Path, ctxs: list[int]
) -> None:
    """One decode step of ``len(ctxs)`` sequences over a random KV history (disjoint blocks)."""
    llm = LLM(tinystories_dir, weight_dtype="int4", num_blocks=60, fused_cpu_decode=True)
    runner = llm.engine.runner
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
    for row, (token, table, ctx, slot) in enumerate(zip(tokens, tables, ctxs, slots, strict=True)):
        expected, new_kv = _decode_step_f64(fused, token, ctx - 1, pools, table, ctx)
        torch.testing.assert_close(hidden[row].double(), expected, atol=1e-4, rtol=1e-4)
        for kv, (k, v) in zip(runner.kv_caches, new_kv, strict=True):
            flat_k, flat_v = (c.view(-1, *c.shape[2:]) for c in (kv.k_cache, kv.v_cache))
            torch.testing.assert_close(flat_k[slot].double(), k, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(flat_v[slot].double(), v, atol=1e-5, rtol=1e-5)
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


def test_engine_decodes_through_the_kernel(lib: ctypes.CDLL, tinystories_dir: Path) -> None:
    """Decode steps of up to MAX_ROWS sequences take the kernel, bigger ones the torch path."""
    llm = LLM(tinystories_dir, weight_dtype="int4")
    fused = llm.engine.runner.fused_decode
    assert isinstance(fused, FusedDecode) and llm.engine.runner.fused_decode_unavailable is None
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    one = llm.generate(["Once upon a time"], params)[0]
    assert len(one.output_token_ids) == 12 and fused.steps == 11  # every token after the prefill's
    two = llm.generate(["Once upon a time", "The cat sat"], params)
    assert [len(o.output_token_ids) for o in two] == [12, 12]
    assert fused.steps == 22  # one step decodes both
    fused.MAX_ROWS = 1
    try:
        again = llm.generate(["Once upon a time", "The cat sat"], params)
        assert [len(o.output_token_ids) for o in again] == [12, 12]
        assert fused.steps == 22  # two rows > MAX_ROWS: the torch path
    finally:
        fused.MAX_ROWS = FusedDecode.MAX_ROWS


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
    text = Path(__file__).resolve().parents[2].joinpath("docs", "engine.md").read_text()
    ids = smollm2_llm.tokenizer.encode(text)[:512]
    runner32 = smollm2_llm.engine.runner
    reference = prefill_logits(runner32.model, runner32.model_config, ids).argmax(-1)
    llm = LLM(
        smollm2_gguf, dtype="float32", weight_dtype="int4", num_blocks=33, fused_cpu_decode=True
    )
    runner = llm.engine.runner
    fused = runner.fused_decode
    assert isinstance(fused, FusedDecode)
    picks = []
    with torch.inference_mode():
        for pos, token in enumerate(ids):
            meta = batch_metadata("decode", [pos], [list(range(pos // 16 + 1))], [pos], [1])
            hidden = fused(torch.tensor([token]), torch.tensor([pos]), meta)
            picks.append(int(runner.model.compute_logits(hidden).argmax(-1)))
    agreement = float((torch.tensor(picks) == reference).float().mean())
    assert agreement >= SMOLLM2_MIN_AGREEMENT["int4"]


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
