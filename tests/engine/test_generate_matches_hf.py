"""Greedy token ids equal transformers' ``generate`` for every engine path.

Covered: the real tinystories checkpoint and tiny random Llama / Qwen2 / Mistral checkpoints
loaded by our loader; batch 1 and batch 8 with mixed prompt lengths (3 to 28 tokens); prefix
caching off, cold and warm (warm must report cached tokens), a prefix shared within one batch;
chunked prefill forced by a tiny
token budget; preemption (recompute and swap) forced by a tiny pool; RoPE scaling variants.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import torch  # noqa: F401 - loaded up front so the engine fixtures pin it to one thread
from engine_support import hf_greedy

from promptcache.engine import LLM, RequestOutput, SamplingParams

MAX_NEW_TOKENS = 24
GREEDY = SamplingParams(temperature=0.0, max_tokens=MAX_NEW_TOKENS)


def _check_equal(outs: list[RequestOutput], reference: list[list[int]], prompts: list[str]) -> None:
    for prompt, out, ref in zip(prompts, outs, reference, strict=True):
        got = out.output_token_ids
        if got != ref:
            same = next((i for i, (a, b) in enumerate(zip(got, ref, strict=False)) if a != b), None)
            pytest.fail(
                f"prompt {prompt[:40]!r}: first divergence at output token {same}\n"
                f"  engine: {got}\n  hf:     {ref}"
            )


@pytest.fixture(scope="module")
def tiny_story_case(
    tinystories_dir: Path, prompts: list[str]
) -> tuple[Path, list[list[int]], list[list[int]]]:
    """(checkpoint, prompt ids, HF greedy outputs) for the tinystories checkpoint."""
    from promptcache.engine import Tokenizer

    tokenizer = Tokenizer.from_pretrained(tinystories_dir)
    ids = [tokenizer.encode(p) for p in prompts]
    return tinystories_dir, ids, hf_greedy(tinystories_dir, ids, MAX_NEW_TOKENS)


def _llm(model_dir: Path, **overrides: Any) -> LLM:
    return LLM(model_dir, dtype="float32", **{"block_size": 4, **overrides})


def test_batch_of_one_matches_hf(tiny_story_case: Any, prompts: list[str]) -> None:
    model_dir, ids, reference = tiny_story_case
    llm = _llm(model_dir, enable_prefix_caching=False)
    outs = [llm.generate(p, GREEDY)[0] for p in ids]
    _check_equal(outs, reference, prompts)
    assert all(o.num_cached_tokens == 0 for o in outs)


def test_batch_of_eight_cold_then_warm_matches_hf(tiny_story_case: Any, prompts: list[str]) -> None:
    model_dir, ids, reference = tiny_story_case
    llm = _llm(model_dir)
    cold = llm.generate(ids, GREEDY)
    _check_equal(cold, reference, prompts)
    warm = llm.generate(ids, GREEDY)
    _check_equal(warm, reference, prompts)
    # Every full block but the one holding the last prompt token is a hit on the warm run.
    expected = [(len(p) - 1) // 4 * 4 for p in ids]
    assert [o.num_cached_tokens for o in warm] == expected
    assert sum(expected) > 0
    stats = llm.engine.stats()
    assert stats.prefix_cache_hits_tokens >= sum(expected)
    assert stats.num_free_blocks == stats.num_total_blocks


def test_a_prefix_shared_within_one_batch_is_computed_once(
    tiny_story_case: Any, prompts: list[str]
) -> None:
    """Requests sharing a 40-token prefix, added together: the first computes it, the others
    wait one step and hit it in the cache (the scheduler's in-batch prefix sharing)."""
    model_dir, ids, _ = tiny_story_case
    common = [t for p in ids for t in p][:40]  # 10 blocks of 4, above the 32-token threshold
    batch = [common + p[1:] for p in ids[:4]]  # each tail: a prompt without its BOS
    reference = hf_greedy(model_dir, batch, MAX_NEW_TOKENS)
    llm = _llm(model_dir)
    outs = llm.generate(batch, GREEDY)
    _check_equal(outs, reference, prompts[:4])
    assert outs[0].num_cached_tokens == 0
    assert all(o.num_cached_tokens >= 40 for o in outs[1:])
    assert llm.engine.stats().prefix_cache_hits_tokens == sum(o.num_cached_tokens for o in outs)


def test_requests_on_one_cached_prefix_prefill_together_and_match_hf(
    tiny_story_case: Any, prompts: list[str]
) -> None:
    """A 100-token prefix cached by one request, then 4 requests on it at once: they prefill in
    one step with the same cached blocks, which the torch backend attends to in one stacked call
    (``(4 - 1) x 100`` saved reads clear its 256-token bar), and each equals transformers."""
    model_dir, ids, _ = tiny_story_case
    common = [t for p in ids for t in p][:100]  # 25 blocks of 4
    batch = [common + p[1:] for p in ids[:5]]
    reference = hf_greedy(model_dir, batch, MAX_NEW_TOKENS)
    llm = _llm(model_dir)
    first = llm.generate([batch[0]], GREEDY)
    rest = llm.generate(batch[1:], GREEDY)
    _check_equal(first + rest, reference, prompts[:5])
    assert [o.num_cached_tokens for o in rest] == [100] * 4


def test_prefix_caching_off_reports_no_cached_tokens(
    tiny_story_case: Any, prompts: list[str]
) -> None:
    model_dir, ids, reference = tiny_story_case
    llm = _llm(model_dir, enable_prefix_caching=False, block_size=16)
    for _ in range(2):
        outs = llm.generate(ids, GREEDY)
        _check_equal(outs, reference, prompts)
        assert [o.num_cached_tokens for o in outs] == [0] * len(ids)


def _generate_watching_prefill(
    llm: LLM, ids: list[list[int]], tag: str
) -> tuple[list[RequestOutput], dict[str, list[int]]]:
    """Step the engine by hand; return the outputs and, per request, each new computed-token
    count seen after a step while its prompt was still prefilling (the chunk boundaries)."""
    engine = llm.engine
    names = [f"{tag}{i}" for i in range(len(ids))]
    for name, prompt in zip(names, ids, strict=True):
        engine.add_request(name, prompt, GREEDY)
    partial: dict[str, list[int]] = {name: [] for name in names}
    final: dict[str, RequestOutput] = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                final[out.request_id] = out
        for name in names:
            for seq in engine.scheduler.get_sequences(name):
                done = seq.num_computed_tokens
                if 0 < done < seq.num_prompt_tokens and partial[name][-1:] != [done]:
                    partial[name].append(done)
    return [final[name] for name in names], partial


def test_chunked_prefill_matches_hf(tiny_story_case: Any, prompts: list[str]) -> None:
    model_dir, ids, reference = tiny_story_case
    budget = 5
    llm = _llm(model_dir, max_num_batched_tokens=budget)
    for tag in ("cold", "warm"):  # warm: the chunks start after cached prefixes
        outs, partial = _generate_watching_prefill(llm, ids, tag)
        _check_equal(outs, reference, prompts)
        for prompt, name, out in zip(ids, partial, outs, strict=True):
            # Chunk boundaries, from the prefix-cache hit to the whole prompt: no step computes
            # more of a prompt than the step's token budget.
            bounds = [out.num_cached_tokens, *partial[name], len(prompt)]
            assert all(0 < b - a <= budget for a, b in pairwise(bounds)), (name, bounds)
        if tag == "cold":  # the longest prompt takes ceil(len / budget) chunks, or more
            longest = max(range(len(ids)), key=lambda i: len(ids[i]))
            assert len(partial[f"cold{longest}"]) >= -(-len(ids[longest]) // budget) - 1
    assert sum(o.num_cached_tokens for o in outs) > 0, "the warm pass reused no prefix"


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_preemption_matches_hf(tiny_story_case: Any, prompts: list[str], mode: str) -> None:
    model_dir, ids, reference = tiny_story_case
    extra = {"num_cpu_blocks": 64} if mode == "swap" else {}
    llm = _llm(model_dir, num_blocks=16, preemption_mode=mode, **extra)
    outs = llm.generate(ids, GREEDY)
    _check_equal(outs, reference, prompts)
    stats = llm.engine.stats()
    assert stats.num_preemptions > 0, "the pool was meant to be too small for the batch"
    assert stats.num_free_blocks == stats.num_total_blocks


@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral"])
def test_tiny_random_models_match_hf(tiny_checkpoint: Any, prompts: list[str], arch: str) -> None:
    model_dir = tiny_checkpoint(arch)
    llm = _llm(model_dir)
    ids = [llm.tokenizer.encode(p) for p in prompts]
    reference = hf_greedy(model_dir, ids, MAX_NEW_TOKENS)
    _check_equal(llm.generate(ids, GREEDY), reference, prompts)
    warm = llm.generate(ids, GREEDY)
    _check_equal(warm, reference, prompts)
    assert sum(o.num_cached_tokens for o in warm) > 0


ROPE_CASES = {
    "linear": {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    "llama3": {
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        }
    },
    # Generation runs past max_position_embeddings=32, where dynamic NTK changes the base.
    "dynamic": {
        "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
        "max_position_embeddings": 32,
    },
}


@pytest.mark.parametrize("case", sorted(ROPE_CASES))
def test_rope_scaling_matches_hf(tiny_checkpoint: Any, prompts: list[str], case: str) -> None:
    model_dir = tiny_checkpoint("llama", **ROPE_CASES[case])
    llm = _llm(model_dir, max_model_len=64)
    ids = [llm.tokenizer.encode(p) for p in prompts[2:5]]
    reference = hf_greedy(model_dir, ids, MAX_NEW_TOKENS)
    _check_equal(llm.generate(ids, GREEDY), reference, prompts[2:5])
