"""Sampler: filters match transformers' logits warpers, penalties, logprobs, seeded sampling."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from promptcache.engine import LLM, SamplingParams
from promptcache.engine.sampler import Sampler, SampleRequest, apply_penalties, filter_logits
from promptcache.engine.sampling_params import MAX_TOP_K

VOCAB = 64
FILTER_CASES = [  # (temperature, top_k, top_p, min_p)
    (1.0, 5, 1.0, 0.0),
    (0.7, 0, 0.8, 0.0),
    (1.3, 0, 1.0, 0.1),
    (1.0, 10, 0.9, 0.05),
    (0.5, 1, 1.0, 0.0),
    (1.0, 0, 0.3, 0.0),
    (1.0, VOCAB + 5, 1.0, 0.0),
]


def fixed_logits(rows: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, VOCAB, generator=gen) * 3.0


def hf_reference(
    logits: torch.Tensor, temperature: float, k: int, p: float, m: float
) -> torch.Tensor:
    """transformers' warpers in generate()'s order: temperature, top-k, top-p, min-p."""
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    scores = TemperatureLogitsWarper(temperature)(None, logits.clone())
    if k:
        scores = TopKLogitsWarper(min(k, VOCAB))(None, scores)
    if p < 1.0:
        scores = TopPLogitsWarper(p)(None, scores)
    if m:
        scores = MinPLogitsWarper(m)(None, scores)
    return scores


def test_top_k_top_p_min_p_match_transformers_warpers() -> None:
    logits = fixed_logits(len(FILTER_CASES))
    temps = torch.tensor([c[0] for c in FILTER_CASES])
    ours = filter_logits(
        logits / temps.unsqueeze(1),
        torch.tensor([c[1] for c in FILTER_CASES]),
        torch.tensor([c[2] for c in FILTER_CASES]),
        torch.tensor([c[3] for c in FILTER_CASES]),
    )
    for row, case in enumerate(FILTER_CASES):
        ref = hf_reference(logits[row : row + 1], *case)[0]
        kept = torch.isfinite(ours[row])
        assert kept.tolist() == torch.isfinite(ref).tolist(), f"case {case}"
        torch.testing.assert_close(ours[row].softmax(-1), ref.softmax(-1))
    assert int(torch.isfinite(ours[0]).sum()) == 5
    assert int(torch.isfinite(ours[4]).sum()) == 1


def test_top_p_one_keeps_tokens_after_the_cumulative_mass_rounds_to_one() -> None:
    """top_p = 1 is off: with one dominant logit the fp32 mass before the tail tokens is exactly
    1.0, and ``mass_before >= top_p`` alone dropped them (an AVX2 CPU's sums got there on
    test_top_k_top_p_min_p_match_transformers_warpers' random logits too)."""
    logits = torch.zeros(2, VOCAB)
    logits[:, 0] = 30.0  # tail probability exp(-30) ~ 1e-13: 1 - 63e-13 rounds to 1.0 in fp32
    assert float(logits[0].softmax(-1)[0]) == 1.0
    out = filter_logits(
        logits, torch.tensor([0, 0]), torch.tensor([1.0, 0.999]), torch.tensor([0.0, 0.0])
    )
    assert torch.isfinite(out[0]).all()  # off: every token kept
    assert torch.isfinite(out[1]).tolist() == [True] + [False] * (VOCAB - 1)  # on: the top one


def test_sampling_draws_from_the_filtered_distribution() -> None:
    logits = fixed_logits(1, seed=3)
    params = SamplingParams(temperature=0.8, top_k=6, top_p=0.95)
    filtered = filter_logits(
        logits / 0.8, torch.tensor([6]), torch.tensor([0.95]), torch.tensor([0.0])
    )
    expected = filtered.softmax(-1)[0]
    sampler = Sampler(seed=0)
    gen = torch.Generator().manual_seed(7)
    draws = [
        sampler(logits, [SampleRequest(params, [1], 1, gen)]).token_ids[0] for _ in range(3000)
    ]
    counts = torch.bincount(torch.tensor(draws), minlength=VOCAB).float() / len(draws)
    assert set(draws) <= set(torch.nonzero(expected > 0).flatten().tolist())
    assert (counts - expected).abs().max() < 0.03


def test_a_top_k_beyond_the_vocabulary_keeps_every_token() -> None:
    # the largest accepted top_k must not overflow the sampler's tensors (it once failed the
    # whole engine step) and must draw exactly what top_k off draws
    logits = fixed_logits(1, seed=4)

    def draw(top_k: int) -> int:
        params = SamplingParams(temperature=1.0, top_k=top_k, top_p=0.99)
        gen = torch.Generator().manual_seed(5)
        return Sampler(seed=0)(logits, [SampleRequest(params, [1], 1, gen)]).token_ids[0]

    assert draw(MAX_TOP_K) == draw(0)


def test_seeded_rows_do_not_depend_on_the_rest_of_the_batch() -> None:
    logits = fixed_logits(3, seed=5)
    params = SamplingParams(temperature=1.0, seed=11)

    def draw(rows: list[int]) -> int:
        reqs = [
            SampleRequest(params, [1], 1, torch.Generator().manual_seed(11))
            if r == 0
            else SampleRequest(SamplingParams(temperature=1.0), [1], 1)
            for r in rows
        ]
        out = Sampler(seed=123)(logits[rows], reqs)
        return out.token_ids[rows.index(0)]

    assert draw([0]) == draw([2, 1, 0]) == draw([1, 0])


def test_penalties_match_transformers_and_openai_formulas() -> None:
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    logits = fixed_logits(2, seed=9)
    prompt, output = [3, 4, 5, 3], [5, 6, 6, 6]
    rep = SamplingParams(repetition_penalty=1.3)
    pres_freq = SamplingParams(presence_penalty=0.5, frequency_penalty=0.25)
    got = apply_penalties(
        logits.clone(),
        [SampleRequest(rep, prompt + output, 4), SampleRequest(pres_freq, prompt + output, 4)],
    )
    expected_rep = RepetitionPenaltyLogitsProcessor(1.3)(
        torch.tensor([prompt + output]), logits[:1].clone()
    )
    torch.testing.assert_close(got[:1], expected_rep)
    expected = logits[1].clone()
    expected[5] -= 0.5 + 0.25 * 1  # output tokens only: the prompt's 3 and 4 are untouched
    expected[6] -= 0.5 + 0.25 * 3
    torch.testing.assert_close(got[1], expected)


def test_greedy_uses_penalised_logits_and_logprobs_are_raw() -> None:
    logits = torch.zeros(1, VOCAB)
    logits[0, 7], logits[0, 8] = 5.0, 4.0
    params = SamplingParams(temperature=0.0, repetition_penalty=2.0, logprobs=2)
    out = Sampler()(logits, [SampleRequest(params, [7], 1)])
    assert out.token_ids == [8]  # 5 / 2 < 4
    lp = out.logprobs[0]
    assert lp is not None and lp.token_id == 8
    raw = logits.log_softmax(-1)[0]
    assert lp.top == [(7, pytest.approx(float(raw[7]))), (8, pytest.approx(float(raw[8])))]
    assert lp.logprob == pytest.approx(float(raw[8]))


def test_seeded_generation_is_reproducible(tinystories_dir: Path) -> None:
    llm = LLM(tinystories_dir, dtype="float32")
    seeded = SamplingParams(temperature=1.0, top_p=0.95, seed=1234, max_tokens=16)
    other = SamplingParams(temperature=1.0, seed=99, max_tokens=16)
    alone = llm.generate("Once upon a time", seeded)[0].output_token_ids
    batched = llm.generate(["The dog", "Once upon a time", "Sam"], [other, seeded, other])
    assert batched[1].output_token_ids == alone
    again = llm.generate("Once upon a time", seeded)[0].output_token_ids
    assert again == alone
    different = SamplingParams(temperature=1.0, top_p=0.95, seed=4321, max_tokens=16)
    assert llm.generate("Once upon a time", different)[0].output_token_ids != alone


def test_n_samples_share_the_prompt_and_differ(tinystories_dir: Path) -> None:
    llm = LLM(tinystories_dir, dtype="float32", block_size=4)
    params = SamplingParams(n=3, temperature=1.0, seed=5, max_tokens=12, logprobs=1)
    outs = llm.generate("Lily and Tom went to the park. They saw a big tree", params)
    assert [o.sample_index for o in outs] == [0, 1, 2]
    assert len({tuple(o.output_token_ids) for o in outs}) == 3
    for out in outs:
        assert out.logprobs is not None and len(out.logprobs) == len(out.output_token_ids)
        assert [lp.token_id for lp in out.logprobs] == out.output_token_ids
    again = llm.generate("Lily and Tom went to the park. They saw a big tree", params)
    assert [o.output_token_ids for o in again] == [o.output_token_ids for o in outs]
    assert all(o.num_cached_tokens > 0 for o in again)
    stats = llm.engine.stats()
    assert stats.num_free_blocks == stats.num_total_blocks
