"""Speculative decoding by prompt lookup on the real tinystories checkpoint.

Greedy output with drafts equals plain greedy decoding token for token, alone, batched, and under
preemption by recompute and by swap; blocks all return to the free queue; the prefix cache
holds exactly the K/V a plain engine computes for the same tokens; the draft counters equal an
independent replay of prompt lookup over the plain output.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from promptcache.engine import LLMEngine, SamplingParams
from promptcache.engine.block_manager import hash_block_tokens, prefix_block_hashes
from promptcache.engine.outputs import RequestOutput
from promptcache.engine.spec_decode import (
    DraftState,
    NgramProposer,
    SpeculativeConfig,
    accepted_length,
)
from promptcache.engine.spec_decode.draft_length import (
    PRIOR_ACCEPTED,
    PRIOR_TRIALS,
    AcceptanceEstimate,
    best_draft_length,
    verify_cost,
)
from promptcache.engine.spec_decode.ngram_proposer import NgramIndex
from promptcache.errors import ConfigError

SPEC = {
    "method": "ngram",
    "num_speculative_tokens": 4,
    "prompt_lookup_max": 3,
    "prompt_lookup_min": 1,
}

STORY = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside in the park "
    "with her friends. One day, she found a big red ball under a tree."
)
ECHO_PROMPTS = [
    # The text twice, then its start again: the model copies, so long drafts are accepted.
    f"{STORY} {STORY} Once upon a time, there was",
    "Tom and his dog went to the park. Tom and his dog went to the park. Tom and his dog",
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat. The cat",
    'Ben said, "I want the red car." Mom said, "You can have the red car." Ben said, "I want',
]


def _engine(model: Path, spec: dict[str, Any] | None, **overrides: Any) -> LLMEngine:
    options: dict[str, Any] = {"dtype": "float32", "seed": 0}
    options.update(overrides)
    return LLMEngine.from_pretrained(model, speculative_config=spec, **options)


def _generate(
    engine: LLMEngine,
    prompts: list[str],
    params: SamplingParams,
    *,
    prefix: str = "r",
) -> list[RequestOutput]:
    """All prompts at once (continuous batching); invariants checked after every step.

    Returns the finished outputs in prompt order, samples of one prompt by ``sample_index``."""
    ids = [f"{prefix}{i}" for i in range(len(prompts))]
    for rid, prompt in zip(ids, prompts, strict=True):
        engine.add_request(rid, prompt, params)
    done: dict[tuple[str, int], RequestOutput] = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[(out.request_id, out.sample_index)] = out
        engine.scheduler.check_integrity()
    return [done[(rid, i)] for rid in ids for i in range(params.n)]


def _drained(engine: LLMEngine) -> None:
    """Every block back in the free queue, no draft index left behind."""
    bm = engine.scheduler.block_manager
    assert bm.num_free_blocks == bm.num_blocks
    assert bm.num_used_blocks == 0
    proposer = engine.scheduler.proposer
    assert proposer is not None and proposer.num_indexed_sequences == 0


@pytest.fixture(scope="module")
def plain(tinystories_dir: Path) -> LLMEngine:
    return _engine(tinystories_dir, None)


@pytest.fixture(scope="module")
def all_prompts(prompts: list[str]) -> list[str]:
    return prompts + ECHO_PROMPTS


# Config ------------------------------------------------------------------------------------


def test_config_follows_vllm_defaults() -> None:
    both = SpeculativeConfig.parse({"method": "ngram", "num_speculative_tokens": 3})
    assert (both.prompt_lookup_min, both.prompt_lookup_max) == (5, 5)
    only_max = SpeculativeConfig.parse(
        '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'
    )
    assert (only_max.prompt_lookup_min, only_max.prompt_lookup_max) == (4, 4)
    only_min = SpeculativeConfig.parse(
        {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2}
    )
    assert (only_min.prompt_lookup_min, only_min.prompt_lookup_max) == (2, 2)
    assert SpeculativeConfig.parse(only_min.to_dict()) == only_min


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "speculative_config is not valid JSON"),
        ("[1, 2]", "speculative_config must be an object"),
        ({"method": "eagle", "num_speculative_tokens": 3}, "method must be one of ngram"),
        ({"num_speculative_tokens": 3}, 'needs "method": "ngram"'),
        ({"method": "ngram"}, "needs num_speculative_tokens"),
        (
            {"method": "ngram", "num_speculative_tokens": 0},
            "num_speculative_tokens must be between 1",
        ),
        (
            {"method": "ngram", "num_speculative_tokens": 65},
            "num_speculative_tokens must be between 1",
        ),
        (
            {"method": "ngram", "num_speculative_tokens": "4"},
            "num_speculative_tokens must be an integer",
        ),
        ({"method": "ngram", "num_speculative_tokens": True}, "must be an integer"),
        (
            {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 0},
            "prompt_lookup_max must be >= 1",
        ),
        (
            {
                "method": "ngram",
                "num_speculative_tokens": 3,
                "prompt_lookup_min": 4,
                "prompt_lookup_max": 2,
            },
            "prompt_lookup_min=4 must be <= prompt_lookup_max=2",
        ),
        ({"method": "ngram", "num_speculative_tokens": 3, "draft_model": "x"}, "unknown"),
    ],
)
def test_bad_config_is_a_config_error(value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SpeculativeConfig.parse(value)


def test_engine_config_rejects_a_bad_speculative_config(tinystories_dir: Path) -> None:
    with pytest.raises(ConfigError, match="needs num_speculative_tokens"):
        LLMEngine.from_pretrained(tinystories_dir, speculative_config={"method": "ngram"})


# Proposer ----------------------------------------------------------------------------------


def _brute_force_draft(tokens: list[int], k: int, n_min: int, n_max: int) -> list[int]:
    """Prompt lookup by scanning: longest n first, most recent earlier occurrence."""
    length = len(tokens)
    for n in range(min(n_max, length - 1), n_min - 1, -1):
        suffix = tokens[length - n :]
        for start in range(length - n - 1, -1, -1):
            if tokens[start : start + n] == suffix:
                end = start + n
                return tokens[end : min(end + k, length)] if k > 0 else []
    return []


def test_verify_cost_steps_at_each_tile_of_eight_rows() -> None:
    costs = [verify_cost(k) for k in range(12)]
    assert costs[0] == 1.0
    assert costs == sorted(costs)
    # rows 2-8 share the products' first register tile: each costs the same little more; a
    # 9th row starts a second tile
    steps = [b - a for a, b in itertools.pairwise(costs)]  # steps[k]: k drafts -> k + 1
    assert max(steps[1:7]) - min(steps[1:7]) < 1e-9 < 0.3 < steps[7] - steps[6]
    assert costs[1] < 1.5
    with pytest.raises(ValueError, match="0 tokens or more"):
        verify_cost(-1)


def test_draft_length_follows_the_acceptance_estimate() -> None:
    assert best_draft_length(0.0, 8) == 0
    assert best_draft_length(0.2, 8) == 0  # chance matches in natural text: plain decode
    # copying: a full tile of rows (8 rows, 7 drafts), or every draft allowed below that
    assert best_draft_length(0.99, 8) == 7
    assert best_draft_length(0.99, 5) == 5
    lengths = [best_draft_length(a / 20, 8) for a in range(20)]
    assert lengths == sorted(lengths)
    assert best_draft_length(0.9, 3) == 3
    estimate = AcceptanceEstimate()
    prior = PRIOR_ACCEPTED / PRIOR_TRIALS
    assert estimate.rate == prior
    estimate.observe(4, 4)
    high = estimate.rate
    estimate.observe(0, 4)
    assert prior < estimate.rate < high
    for _ in range(30):
        estimate.observe(0, 1)
    assert estimate.rate < 0.05


def test_index_equals_a_brute_force_scan() -> None:
    rng = random.Random(0)
    for _ in range(40):
        n_min = rng.randint(1, 3)
        n_max = rng.randint(n_min, 5)
        k = rng.randint(1, 6)
        index = NgramIndex(n_min, n_max)
        assert index.propose([], k) == []
        tokens = [rng.randint(0, 4) for _ in range(rng.randint(1, 12))]
        while len(tokens) < 120:  # grows by 1..k tokens per call, as decoding does
            want = _brute_force_draft(tokens, k, n_min, n_max)
            assert index.propose(tokens, k) == want
            tokens += [rng.randint(0, 4) for _ in range(rng.randint(1, k + 1))]


def test_proposer_cuts_the_match_to_the_length_that_pays() -> None:
    rng = random.Random(1)
    proposer = NgramProposer(
        SpeculativeConfig(num_speculative_tokens=6, prompt_lookup_min=1, prompt_lookup_max=3)
    )
    tokens = [rng.randint(0, 4) for _ in range(8)]
    for _ in range(60):
        rate = proposer.acceptance_rate(0) or PRIOR_ACCEPTED / PRIOR_TRIALS
        want = _brute_force_draft(tokens, 6, 1, 3)
        got = proposer.propose(0, tokens, 6)
        assert got == want[: best_draft_length(rate, len(want))]
        if got:
            proposer.observe(0, len(got), len(got))  # every draft kept: never paused
        tokens += [rng.randint(0, 4) for _ in range(rng.randint(1, 4))]
    state = proposer.draft_state(0)
    assert state is not None and state.num_paused_steps == 0 and state.num_drafts > 10
    proposer.forget(0)
    assert proposer.num_indexed_sequences == 0 and proposer.draft_state(0) is None


def test_wasted_drafts_pause_drafting_per_sequence() -> None:
    """Sequence 1's drafts are all rejected, sequence 2's all kept, in the same steps: 1 drafts
    at steps 0, 3, 8, 17 (pauses of 2, 4, 8 steps), 2 at every step; a kept draft ends 1's
    streak, so its next waste pauses it for 2 steps again."""
    proposer = NgramProposer(
        SpeculativeConfig(num_speculative_tokens=3, prompt_lookup_min=1, prompt_lookup_max=2)
    )
    # A period-3 text always matches, so only the back-off can keep a draft back.
    text = {1: [7, 8, 9] * 4, 2: [4, 5, 6] * 4}
    drafted: dict[int, list[int]] = {1: [], 2: []}
    for step in range(20):
        for seq_id in (1, 2):
            draft = proposer.propose(seq_id, text[seq_id], 3)
            # the model's next token: the one the lookup proposes (sequence 1's drafts are
            # rejected all the same), a hit of the free trial while no draft is made
            token = text[seq_id][-3]
            if draft:
                drafted[seq_id].append(step)
                proposer.observe(seq_id, 0 if seq_id == 1 else len(draft), len(draft))
            else:
                proposer.observe_token(seq_id, len(text[seq_id]), token)
            text[seq_id].append(token)
    assert drafted[1] == [0, 3, 8, 17]
    assert drafted[2] == list(range(20))
    state = proposer.draft_state(1)
    assert state is not None
    assert (state.wasted_streak, state.pause_steps_left) == (4, 14)  # 16 steps, 2 gone
    assert state.num_paused_steps == 2 + 4 + 8 + 2
    assert (state.num_drafts, state.num_accepted_tokens) == (4, 0)
    # the pause runs out, a draft is kept, and the streak starts again from a 2-step pause
    for _ in range(14):
        assert proposer.propose(1, text[1], 3) == []
        proposer.observe_token(1, len(text[1]), text[1][-3])
        text[1].append(text[1][-3])
    draft = proposer.propose(1, text[1], 3)
    assert draft
    proposer.observe(1, 1, len(draft))
    state = proposer.draft_state(1)
    assert state is not None and (state.wasted_streak, state.pause_steps_left) == (0, 0)
    text[1].append(text[1][-3])
    draft = proposer.propose(1, text[1], 3)
    assert draft
    proposer.observe(1, 0, len(draft))
    state = proposer.draft_state(1)
    assert state is not None and (state.wasted_streak, state.pause_steps_left) == (1, 2)


def test_accepted_length() -> None:
    assert accepted_length([5, 6, 7], [5, 6, 7, 8]) == 3
    assert accepted_length([5, 6, 7], [5, 9, 7, 8]) == 1
    assert accepted_length([5], [4, 5]) == 0
    assert accepted_length([], [3]) == 0
    with pytest.raises(ValueError, match="3 drafts need 4 target tokens"):
        accepted_length([1, 2, 3], [1, 2, 3])


# Greedy equality ---------------------------------------------------------------------------


def test_greedy_equals_plain_decoding_one_by_one(
    tinystories_dir: Path, plain: LLMEngine, all_prompts: list[str]
) -> None:
    params = SamplingParams(temperature=0, max_tokens=96)
    spec = _engine(tinystories_dir, SPEC)
    for i, prompt in enumerate(all_prompts):
        [want] = _generate(plain, [prompt], params, prefix=f"plain{i}-")
        [got] = _generate(spec, [prompt], params, prefix=f"spec{i}-")
        assert got.output_token_ids == want.output_token_ids, prompt
        assert got.text == want.text
        assert got.finish_reason == want.finish_reason
    stats = spec.stats()
    # The echo prompts make drafts that are accepted, many tokens at a time.
    assert stats.spec_decode_num_accepted_tokens > 100
    assert stats.spec_decode_num_accepted_tokens < stats.spec_decode_num_draft_tokens
    _drained(spec)


# The speculative benchmark's natural-chat questions as a checkpoint without a chat template
# gets them (benchmarks/engine_speculative.py), with its default drafting: on tinystories int4
# the fox story's plain decoding has two best tokens 1.7e-5 apart in logprob at token 72.
NATURAL_PROMPTS = [
    "What are three simple ways to sleep better?\n",
    "Write a short story about a fox who learns to swim.\n",
    "Why is the sky blue? Explain it to a ten-year-old.\n",
]
BENCHMARK_SPEC = {
    "method": "ngram",
    "num_speculative_tokens": 5,
    "prompt_lookup_max": 4,
    "prompt_lookup_min": 2,
}


@pytest.mark.parametrize("weight_dtype", ["int4", "int8"])
def test_quantized_greedy_equals_plain_decoding(
    tinystories_dir: Path, all_prompts: list[str], weight_dtype: str
) -> None:
    """Quantised weights (int4 through the fused CPU kernel where it runs): a verify pass of
    1 + k rows gives each row the logits a one-row step gives it, bit for bit, so no near-tie
    flips (the fox story's at token 72 did when one row's products kept fp32 activations);
    one by one under both draft settings, and int4 batched."""
    prompts = all_prompts + NATURAL_PROMPTS
    params = SamplingParams(temperature=0, max_tokens=128)
    plain = _engine(tinystories_dir, None, weight_dtype=weight_dtype)
    want = [_generate(plain, [p], params, prefix=f"p{i}-")[0] for i, p in enumerate(prompts)]
    for spec_config in (SPEC, BENCHMARK_SPEC):
        spec = _engine(tinystories_dir, spec_config, weight_dtype=weight_dtype)
        for i, prompt in enumerate(prompts):
            [got] = _generate(spec, [prompt], params, prefix=f"s{i}-")
            assert got.output_token_ids == want[i].output_token_ids, prompt
        assert spec.stats().spec_decode_num_accepted_tokens > 100
        _drained(spec)
    if weight_dtype != "int4":
        # The torch path's weight-only layers switch from the int8 kernel to a dense GEMM at
        # DENSE_MIN_ROWS rows, so a batch's verify pass may round otherwise than its plain step.
        return
    # Batched, against plain decoding of the same batch: the kernel's rows are independent.
    plain_batch = _generate(plain, prompts, params, prefix="pb")
    spec = _engine(tinystories_dir, BENCHMARK_SPEC, weight_dtype=weight_dtype)
    got_batch = _generate(spec, prompts, params, prefix="sb")
    assert [o.output_token_ids for o in got_batch] == [o.output_token_ids for o in plain_batch]


@pytest.mark.parametrize(
    "overrides",
    [
        {},  # batched in a large pool
        {"num_blocks": 40, "block_size": 4},  # preemption by recompute
        {"num_blocks": 40, "block_size": 4, "preemption_mode": "swap", "num_cpu_blocks": 256},
        {"max_num_batched_tokens": 6, "block_size": 4},  # drafts cut by the token budget
    ],
    ids=["batched", "recompute", "swap", "small-budget"],
)
def test_greedy_equals_plain_decoding_batched(
    tinystories_dir: Path, all_prompts: list[str], overrides: dict[str, Any]
) -> None:
    params = SamplingParams(temperature=0, max_tokens=48)
    want = _generate(_engine(tinystories_dir, None, **overrides), all_prompts, params)
    spec = _engine(tinystories_dir, SPEC, **overrides)
    got = _generate(spec, all_prompts, params)
    assert [o.output_token_ids for o in got] == [o.output_token_ids for o in want]
    if "num_blocks" in overrides:
        assert spec.stats().num_preemptions > 0
    assert spec.stats().spec_decode_num_accepted_tokens > 0
    _drained(spec)


def test_back_off_pauses_each_sequence_of_a_batch_apart(
    tinystories_dir: Path, all_prompts: list[str]
) -> None:
    """All prompts in one batch, every step traced: a sequence whose verify kept no draft
    verifies none during its pause (2, 4, 8... steps) and drafts again after it, while other
    sequences of the same steps go on drafting; the tokens equal plain decoding's."""
    params = SamplingParams(temperature=0, max_tokens=64)
    want = _generate(_engine(tinystories_dir, None), all_prompts, params)
    spec = _engine(tinystories_dir, SPEC)
    proposer = spec.scheduler.proposer
    assert proposer is not None
    for i, prompt in enumerate(all_prompts):
        spec.add_request(f"r{i}", prompt, params)
    last: dict[int, DraftState] = {}
    done: dict[str, RequestOutput] = {}
    paused_steps = resumed = drafted_beside_a_pause = 0
    while spec.has_unfinished_requests():
        for out in spec.step():
            if out.finished:
                done[out.request_id] = out
        states = {
            seq.seq_id: state
            for seq in spec.scheduler.running
            if (state := proposer.draft_state(seq.seq_id)) is not None
        }
        paused_now = drafted_now = 0
        for seq_id, state in states.items():
            before = last.get(seq_id)
            verified = state.num_drafts - (before.num_drafts if before else 0)
            if before is not None and before.pause_steps_left > 0:
                # a step of the pause: no draft, and one step counted off
                assert verified == 0
                assert state.pause_steps_left == before.pause_steps_left - 1
                paused_steps += 1
                paused_now += 1
            elif verified:
                drafted_now += 1
                if before is not None and before.num_paused_steps > 0:
                    resumed += before.wasted_streak > 0
            if state.wasted_streak > (before.wasted_streak if before else 0):
                # a wasted verify: a pause of 2 ** streak steps (at most 64) starts
                assert state.num_accepted_tokens == (before.num_accepted_tokens if before else 0)
                assert state.pause_steps_left == min(2**state.wasted_streak, 64)
        if paused_now and drafted_now:
            drafted_beside_a_pause += 1
        last = states
        spec.scheduler.check_integrity()
    got = [done[f"r{i}"] for i in range(len(all_prompts))]
    assert [o.output_token_ids for o in got] == [o.output_token_ids for o in want]
    assert paused_steps > 0 and resumed > 0 and drafted_beside_a_pause > 0
    _drained(spec)


def test_penalties_stop_strings_logprobs_and_n_equal_plain(tinystories_dir: Path) -> None:
    plain_engine = _engine(tinystories_dir, None)
    spec = _engine(tinystories_dir, SPEC)
    cases = [
        SamplingParams(temperature=0, max_tokens=40, repetition_penalty=1.3),
        SamplingParams(temperature=0, max_tokens=40, frequency_penalty=0.5, presence_penalty=0.2),
        SamplingParams(temperature=0, max_tokens=60, stop=["park"]),
        SamplingParams(temperature=0, max_tokens=30, logprobs=2),
        SamplingParams(temperature=0, max_tokens=30, n=2),
        # Sampled rows: top_k=1 leaves one token, so a draw equals the greedy choice.
        SamplingParams(temperature=0.8, top_k=1, max_tokens=40, seed=3),
    ]
    for j, params in enumerate(cases):
        want = _generate(plain_engine, ECHO_PROMPTS, params, prefix=f"p{j}-")
        got = _generate(spec, ECHO_PROMPTS, params, prefix=f"s{j}-")
        for w, g in zip(want, got, strict=True):
            assert g.output_token_ids == w.output_token_ids, params
            assert g.text == w.text
            assert g.finish_reason == w.finish_reason
            assert g.stop_reason == w.stop_reason
            if params.logprobs is not None:
                assert g.logprobs is not None and w.logprobs is not None
                assert len(g.logprobs) == len(w.logprobs) == len(g.output_token_ids)
                for a, b in zip(g.logprobs, w.logprobs, strict=True):
                    assert a.token_id == b.token_id
                    assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
                    assert [t for t, _ in a.top] == [t for t, _ in b.top]
    _drained(spec)


def test_seeded_sampling_is_reproducible(tinystories_dir: Path) -> None:
    params = SamplingParams(temperature=1.0, max_tokens=40, seed=7)
    first = _generate(_engine(tinystories_dir, SPEC), ECHO_PROMPTS, params)
    again = _generate(_engine(tinystories_dir, SPEC), ECHO_PROMPTS, params)
    assert [o.output_token_ids for o in first] == [o.output_token_ids for o in again]


# Counters against an independent replay -----------------------------------------------------


def test_draft_counters_equal_an_independent_replay(
    tinystories_dir: Path, plain: LLMEngine, all_prompts: list[str]
) -> None:
    """Replay prompt lookup (by scanning) over the plain greedy output: each step proposes
    from the tokens so far, cuts the draft to the length its acceptance estimate pays for (none
    during a pause: 2, 4, 8... up to 64 steps after 1, 2, 3... verifies in a row that kept no
    draft), keeps the draft's prefix equal to the plain output, and advances by it plus one
    token."""
    cfg = SpeculativeConfig.parse(SPEC)
    k_max = cfg.num_speculative_tokens
    max_tokens = 64
    params = SamplingParams(temperature=0, max_tokens=max_tokens)
    spec = _engine(tinystories_dir, SPEC)
    drafts = draft_tokens = accepted = paused_after_waste = 0
    for i, prompt in enumerate(all_prompts):
        [out] = _generate(plain, [prompt], params, prefix=f"replay{i}-")
        [got] = _generate(spec, [prompt], params, prefix=f"counted{i}-")
        assert got.output_token_ids == out.output_token_ids
        tokens = list(out.prompt_token_ids)
        output = list(out.output_token_ids)
        tokens.append(output[0])  # the prefill samples the first token, without a draft
        done = 1
        estimate = AcceptanceEstimate()
        streak = pause = 0
        while done < len(output):
            room = min(k_max, max_tokens - done - 1)
            lookup = _brute_force_draft(tokens, room, cfg.prompt_lookup_min, cfg.prompt_lookup_max)
            draft = lookup[: best_draft_length(estimate.rate, len(lookup))] if lookup else []
            if pause:
                draft, pause = [], pause - 1
            truth = output[done:]
            match = 0
            while match < len(draft) and match < len(truth) and draft[match] == truth[match]:
                match += 1
            step = min(match + 1, len(truth))
            if draft:
                drafts += 1
                draft_tokens += len(draft)
                accepted += min(match, step)
                estimate.observe(match, len(draft))
                streak = 0 if match else streak + 1
                pause = min(2**streak, 64) if streak else 0
                paused_after_waste += bool(streak)
            elif lookup:  # a draft not made: its first token is checked for free
                estimate.observe(int(lookup[0] == truth[0]), 1)
            tokens += truth[:step]
            done += step
    stats = spec.stats()
    assert stats.spec_decode_num_drafts == drafts
    assert stats.spec_decode_num_draft_tokens == draft_tokens
    assert stats.spec_decode_num_accepted_tokens == accepted
    assert 0 < accepted < draft_tokens
    assert paused_after_waste > 0  # the back-off took part in the replay


# Rollback keeps the prefix cache exact -------------------------------------------------------


def test_rollback_frees_blocks_and_keeps_cached_kv_exact(
    tinystories_dir: Path, all_prompts: list[str]
) -> None:
    """After rejected drafts, every cached block holds the K/V of its own tokens: the same as a
    plain engine's block of the same hash, and its hash is the chain of its tokens."""
    params = SamplingParams(temperature=0, max_tokens=64)
    overrides = {"block_size": 4, "num_blocks": 512}
    plain_engine = _engine(tinystories_dir, None, **overrides)
    spec = _engine(tinystories_dir, SPEC, **overrides)
    released_before = 0
    bm = spec.scheduler.block_manager
    # Count releases of rejected drafts' blocks as they happen.
    trim = bm.trim_to_computed

    def counting_trim(seq: Any) -> int:
        nonlocal released_before
        n = trim(seq)
        released_before += n
        return n

    bm.trim_to_computed = counting_trim  # type: ignore[method-assign]
    want = _generate(plain_engine, all_prompts, params)
    got = _generate(spec, all_prompts, params)
    assert [o.output_token_ids for o in got] == [o.output_token_ids for o in want]
    assert released_before > 0  # some drafts ran past a block boundary and were rejected
    _drained(spec)
    plain_bm = plain_engine.scheduler.block_manager
    plain_cached = {h: b for b, h, _, _ in plain_bm.cached_blocks()}
    spec_cached = spec.scheduler.block_manager.cached_blocks()
    # Every cached block holds tokens of a finished sequence, never a rejected draft.
    real = {h for o in got for h in prefix_block_hashes(o.prompt_token_ids + o.output_token_ids, 4)}
    spec_hashes = {h for _, h, _, _ in spec_cached}
    assert spec_hashes <= real
    # The plain engine caches all but each sequence's last token; with drafts, a stop token
    # that was a draft was computed too (at most one more block per request).
    assert set(plain_cached) <= spec_hashes
    assert len(spec_hashes - set(plain_cached)) <= len(got)
    spec_pool = spec.runner.kv_caches
    plain_pool = plain_engine.runner.kv_caches
    for block_id, block_hash, parent, token_ids in spec_cached:
        assert hash_block_tokens(parent, token_ids) == block_hash
        if block_hash not in plain_cached:
            continue
        other = plain_cached[block_hash]
        for mine, theirs in zip(spec_pool, plain_pool, strict=True):
            torch.testing.assert_close(mine.k_cache[block_id], theirs.k_cache[other])
            torch.testing.assert_close(mine.v_cache[block_id], theirs.v_cache[other])
    # A follow-up that repeats a whole answer hits those blocks and decodes as a plain engine.
    follow = [o.prompt_token_ids + o.output_token_ids[:-1] for o in got[:3]]
    for i, ids in enumerate(follow):
        spec.add_request(f"follow{i}", ids, params)
        plain_engine.add_request(f"follow{i}", ids, params)
    outs: dict[str, dict[str, RequestOutput]] = {"spec": {}, "plain": {}}
    for name, engine in (("spec", spec), ("plain", plain_engine)):
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    outs[name][out.request_id] = out
    for rid, out in outs["spec"].items():
        assert out.num_cached_tokens > 0
        assert out.output_token_ids == outs["plain"][rid].output_token_ids


# Sliding window ------------------------------------------------------------------------------


def test_sliding_window_model_equals_plain_and_frees_blocks(tmp_path: Path) -> None:
    """Drafts on a model whose blocks fall out of a 16-token window: rejected drafts are never
    marked computed, so the window's freeing (which only moves forward) is unaffected."""
    from test_sliding_window import BS, HELD_BOUND, build_window_checkpoint

    model = build_window_checkpoint(tmp_path / "window")
    params = SamplingParams(temperature=0, max_tokens=96, ignore_eos=True)
    overrides = {"block_size": BS, "num_blocks": 64}
    want = _generate(_engine(model, None, **overrides), ECHO_PROMPTS, params)
    spec = _engine(model, SPEC, **overrides)
    assert spec.scheduler.block_manager.sliding_window == 16
    ids = [f"w{i}" for i in range(len(ECHO_PROMPTS))]
    for rid, prompt in zip(ids, ECHO_PROMPTS, strict=True):
        spec.add_request(rid, prompt, params)
    got: dict[str, list[int]] = {}
    bm = spec.scheduler.block_manager
    while spec.has_unfinished_requests():
        for out in spec.step():
            got[out.request_id] = list(out.output_token_ids)
        spec.scheduler.check_integrity()
        for seq in spec.scheduler.running:
            if not seq.is_prefill:
                assert bm.num_held_blocks(seq) <= HELD_BOUND, seq
    assert [got[rid] for rid in ids] == [o.output_token_ids for o in want]
    assert spec.stats().spec_decode_num_accepted_tokens > 0
    _drained(spec)
