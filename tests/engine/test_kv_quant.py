"""Quantised KV caches (int8, fp8 e4m3) on the CPU: round trip, logit error, memory, caching.

Measured on the tinystories checkpoint over tests/data/prompts.txt (every prompt position), fp32
weights, against the fp32 cache (recorded in docs/engine.md, "Quantised KV cache"):

    cache  max |dlogit| / max |logit|   mean |dlogit|   top-1 agreement
    int8   0.020                        0.029           98.4%
    fp8    0.068                        0.098           96.1%

The bounds below leave about 2x margin over those numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from promptcache.engine import LLMEngine, SamplingParams
from promptcache.engine.kv_quant import dequantize, quantize, scales_from_amax

BOUNDS = {  # kv dtype -> (max relative logit error, min top-1 agreement)
    "int8": (0.05, 0.95),
    "fp8": (0.14, 0.90),
}


@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn])
def test_round_trip_error_is_bounded_per_head(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, 16, generator=gen) * torch.tensor([0.1, 1.0, 5.0, 30.0])[:, None]
    scale = scales_from_amax(x.abs().amax(dim=(0, 2)), dtype)
    q = quantize(x, scale, dtype)
    assert q.dtype == dtype
    err = (dequantize(q, scale, torch.float32) - x).abs()
    per_head_max = x.abs().amax(dim=(0, 2))
    if dtype == torch.int8:  # uniform steps: error <= half a step of amax * headroom / 127
        assert (err.amax(dim=(0, 2)) <= scale * 0.5 + 1e-6).all()
    else:  # 3 mantissa bits: relative error <= 2^-4 for normal values
        assert (err <= x.abs() * 2**-4 + 1e-6 * per_head_max[:, None]).all()


def _prompt_logits(engine: LLMEngine, ids: list[int]) -> torch.Tensor:
    """Logits at every position of one prefill through the engine's own KV pool."""
    runner = engine.runner
    n = len(ids)
    blocks = list(range(-(-n // runner.block_size)))
    meta = runner.build_metadata("prefill", list(range(n)), [blocks], [n], [n])
    with torch.inference_mode():
        hidden = runner.model(torch.tensor(ids), torch.arange(n), runner.kv_caches, meta)
        return runner.model.compute_logits(hidden)


@pytest.fixture(scope="module")
def fp32_engine(tinystories_dir: Path) -> LLMEngine:
    return LLMEngine.from_pretrained(tinystories_dir, dtype="float32", num_blocks=64)


@pytest.mark.parametrize("kv_dtype", sorted(BOUNDS))
def test_logit_error_against_fp32_cache(
    tinystories_dir: Path, fp32_engine: LLMEngine, prompts: list[str], kv_dtype: str
) -> None:
    engine = LLMEngine.from_pretrained(
        tinystories_dir, dtype="float32", num_blocks=64, kv_cache_dtype=kv_dtype
    )
    max_rel, agree = 0.0, []
    for prompt in prompts:
        ids = engine.tokenizer.encode(prompt)
        ref, got = _prompt_logits(fp32_engine, ids), _prompt_logits(engine, ids)
        max_rel = max(max_rel, float((got - ref).abs().max() / ref.abs().max()))
        agree.append(float((got.argmax(-1) == ref.argmax(-1)).float().mean()))
    bound_rel, bound_agree = BOUNDS[kv_dtype]
    assert max_rel < bound_rel
    assert sum(agree) / len(agree) > bound_agree
    layer = engine.runner.kv_caches[0]
    assert layer.k_cache.dtype == (torch.int8 if kv_dtype == "int8" else torch.float8_e4m3fn)
    assert layer.k_scale is not None and layer.k_scale.shape == (4,)


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8"])
def test_quantised_cache_holds_4x_the_blocks_and_reuses_them(
    tinystories_dir: Path, prompts: list[str], kv_dtype: str
) -> None:
    budget = 1 << 20
    fp32 = LLMEngine.from_pretrained(
        tinystories_dir, dtype="float32", kv_cache_bytes=budget, block_size=4
    )
    engine = LLMEngine.from_pretrained(
        tinystories_dir,
        dtype="float32",
        kv_cache_bytes=budget,
        kv_cache_dtype=kv_dtype,
        block_size=4,
        max_num_batched_tokens=8,  # chunked prefill reads quantised blocks written earlier
    )
    # 2 (K and V) x 2 layers x 4 tokens x 4 KV heads x 16 dims x 1 byte
    assert engine.runner.bytes_per_block == 2 * 2 * 4 * 4 * 16 == fp32.runner.bytes_per_block // 4
    assert engine.runner.num_blocks == 4 * fp32.runner.num_blocks == budget // 1024
    assert engine.stats().kv_cache_bytes == budget

    def run() -> list[tuple[list[int], int]]:
        for i, prompt in enumerate(prompts):
            engine.add_request(str(i), prompt, SamplingParams(temperature=0.0, max_tokens=12))
        done: dict[str, tuple[list[int], int]] = {}
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    done[out.request_id] = (out.output_token_ids, out.num_cached_tokens)
        return [done[str(i)] for i in range(len(prompts))]

    cold, warm = run(), run()
    assert [ids for ids, _ in warm] == [ids for ids, _ in cold]
    assert sum(cached for _, cached in warm) > 0
