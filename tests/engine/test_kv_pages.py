"""The KV pool's pages become resident on first write (engine/kv_pages.py), and what the pool
holds outside a sequence's written slots never reaches an output.

The pool starts as zeros that cost no memory until written, and a reused block keeps its last
owner's K/V. Attention must therefore read a sequence's keys only below its context length (or
give the rest an exact zero weight): the engine tests below fill every slot of the pool with
large random values before any request, and the greedy tokens and their logprobs must equal, bit
for bit, those of an engine whose pool is all zeros, on both the torch path and the fused CPU
kernel, with prefix-cache hits, a batch of different lengths and lengths that end mid-block.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
import torch
from engine_support import hf_greedy

from promptcache.engine import LLM, SamplingParams
from promptcache.engine.kv_pages import lazily_zeroed, zeroed_pool

MIB = 2**20

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads RssAnon from /proc/self/status"
)


def rss_anon() -> int:
    """This process's resident anonymous memory in bytes (RssAnon of /proc/self/status)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_pool_pages_become_resident_as_they_are_written() -> None:
    shape = (1024, 16, 4, 64)  # 16 MiB per tensor in fp32; 2 x 16 tensors = 512 MiB
    assert lazily_zeroed(512 * MIB)
    before = rss_anon()
    pool = zeroed_pool(16, shape, torch.float32, torch.device("cpu"))
    assert len(pool) == 16
    assert rss_anon() - before < 32 * MIB  # the 512 MiB are mapped, not resident
    k0, v15 = pool[0][0], pool[15][1]
    assert k0.shape == shape and k0.is_contiguous() and k0.dtype == torch.float32
    assert float(k0.abs().sum()) == 0.0 and float(v15.abs().sum()) == 0.0  # reads are zeros
    assert rss_anon() - before < 32 * MIB  # reading zero pages makes nothing resident
    pointers = sorted(t.data_ptr() for pair in pool for t in pair)
    assert all(b - a == 16 * MIB for a, b in itertools.pairwise(pointers))
    for k, v in pool[:4]:  # write all of four layers' K and V: 128 MiB
        k.fill_(1.0)
        v.fill_(2.0)
    grown = rss_anon() - before
    assert 120 * MIB < grown < 160 * MIB
    assert float(pool[4][0].abs().sum()) == 0.0  # other layers untouched by the writes
    assert float(pool[3][1].sum()) == 2.0 * pool[3][1].numel()


def test_quantised_pool_dtypes_view_one_mapping() -> None:
    for dtype in (torch.int8, torch.bfloat16, torch.float8_e4m3fn):
        pool = zeroed_pool(3, (5, 16, 2, 8), dtype, torch.device("cpu"))
        for k, v in pool:
            assert k.dtype == v.dtype == dtype and k.shape == v.shape == (5, 16, 2, 8)
            assert float(k.float().abs().sum()) == 0.0
        pool[1][0][2, 3] = 1
        assert float(pool[1][0].float().sum()) == 16.0 and float(pool[0][1].float().sum()) == 0.0


def test_engine_pool_is_not_resident_until_used(tinystories_dir: Path) -> None:
    LLM(tinystories_dir, num_blocks=8)  # first load: imports and one-time allocations
    before = rss_anon()
    llm = LLM(tinystories_dir, kv_cache_bytes=1024 * MIB)
    runner = llm.engine.runner
    assert runner.kv_cache_bytes > 1000 * MIB
    assert rss_anon() - before < 128 * MIB
    out = llm.generate(["Once upon a time"], SamplingParams(temperature=0, max_tokens=8))
    assert len(out[0].output_token_ids) == 8
    assert rss_anon() - before < 128 * MIB  # a few blocks written, not the pool


def _fill_with_noise(llm: LLM, seed: int) -> None:
    """Every slot of every layer's K and V: large random finite values."""
    gen = torch.Generator().manual_seed(seed)
    for layer in llm.engine.runner.kv_caches:
        for cache in (layer.k_cache, layer.v_cache):
            cache.copy_(torch.randn(cache.shape, generator=gen) * 1e3)


def _greedy_runs(llm: LLM, prompts: list[list[int]]) -> list[tuple[list[int], list[float]]]:
    """Greedy tokens and their logprobs: the prompts as one batch, then again (prefix hits)."""
    params = SamplingParams(temperature=0, max_tokens=20, logprobs=0)
    results = []
    for _ in range(2):
        for out in llm.generate(prompts, params):
            assert out.logprobs is not None
            assert [e.token_id for e in out.logprobs] == list(out.output_token_ids)
            results.append((list(out.output_token_ids), [e.logprob for e in out.logprobs]))
    return results


def _prompts() -> list[list[int]]:
    gen = torch.Generator().manual_seed(7)
    prefix = torch.randint(3, 2000, (37,), generator=gen).tolist()  # 2 blocks and 5 tokens
    return [
        [1, *prefix],
        [1, *prefix, 400, 401, 402],
        [1, 50, 60],
        [1, *torch.randint(3, 2000, (70,), generator=gen).tolist()],
    ]


@pytest.mark.parametrize(
    "settings",
    [
        {"fused_cpu_decode": False},  # torch attention and layers, fp32
        {"fused_cpu_decode": False, "weight_dtype": "int4"},
        {"weight_dtype": "int4"},  # the fused CPU kernel, prefill and decode
    ],
    ids=["torch-fp32", "torch-int4", "fused-int4"],
)
def test_noise_outside_written_slots_never_reaches_outputs(
    tinystories_dir: Path, settings: dict[str, object]
) -> None:
    prompts = _prompts()
    clean = LLM(tinystories_dir, num_blocks=40, **settings)
    noisy = LLM(tinystories_dir, num_blocks=40, **settings)
    _fill_with_noise(noisy, seed=1)
    fused = settings.get("weight_dtype") == "int4" and "fused_cpu_decode" not in settings
    assert (noisy.engine.runner.fused_decode is not None) == fused
    expected = _greedy_runs(clean, prompts)
    assert _greedy_runs(noisy, prompts) == expected  # token ids and logprobs, bit for bit
    if settings == {"fused_cpu_decode": False}:
        # and the fp32 torch path is still transformers' greedy continuation
        assert [ids for ids, _ in expected[:4]] == hf_greedy(tinystories_dir, prompts, 20)
