"""The LLMEngine step API and LLM.generate: errors, abort, stats, finish reasons, lazy import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch  # noqa: F401 - loaded up front so the engine fixtures pin it to one thread

from promptcache.engine import LLM, LLMEngine, SamplingParams
from promptcache.errors import ConfigError, InvalidRequestError

GREEDY = SamplingParams(temperature=0.0, max_tokens=12)


@pytest.fixture(scope="module")
def engine(tinystories_dir: Path) -> LLMEngine:
    return LLMEngine.from_pretrained(
        tinystories_dir, dtype="float32", block_size=4, num_blocks=48, max_model_len=64
    )


def _drain(engine: LLMEngine) -> dict[str, list[int]]:
    done = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[out.request_id] = out.output_token_ids
    return done


def test_importing_the_package_does_not_import_torch() -> None:
    code = (
        "import sys, json\n"
        "import promptcache.engine as e\n"
        "from promptcache.engine import SamplingParams, EngineConfig\n"
        "SamplingParams(temperature=0); EngineConfig()\n"
        "heavy = ('torch', 'transformers', 'tokenizers')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_bad_requests_raise_invalid_request_error(engine: LLMEngine) -> None:
    with pytest.raises(InvalidRequestError, match="max_model_len is 64"):
        engine.add_request("long", list(range(3, 80)), GREEDY)
    with pytest.raises(InvalidRequestError, match="outside the vocabulary"):
        engine.add_request("vocab", [1, 5, 2048], GREEDY)
    with pytest.raises(InvalidRequestError, match="prompt is empty"):
        engine.add_request("empty", [], GREEDY)
    with pytest.raises(InvalidRequestError, match="string or a list of token ids"):
        engine.add_request("type", 3.5, GREEDY)  # type: ignore[arg-type]
    engine.add_request("dup", "Once upon a time", GREEDY)
    with pytest.raises(InvalidRequestError, match="already in flight"):
        engine.add_request("dup", "Once upon a time", GREEDY)
    engine.abort_request("dup")
    assert not engine.has_unfinished_requests()


def test_bad_engine_options_raise_config_error(tinystories_dir: Path) -> None:
    with pytest.raises(ConfigError, match="unknown engine option"):
        LLMEngine.from_pretrained(tinystories_dir, block_sise=16)
    with pytest.raises(ConfigError, match="max_model_len=4096 exceeds the 512 positions"):
        LLMEngine.from_pretrained(tinystories_dir, max_model_len=4096)
    with pytest.raises(ConfigError, match="kv_cache_bytes=100 holds no KV block"):
        LLMEngine.from_pretrained(tinystories_dir, kv_cache_bytes=100)


def test_abort_frees_blocks_at_once_and_nothing_leaks(engine: LLMEngine) -> None:
    total = engine.stats().num_total_blocks
    for i in range(6):
        engine.add_request(f"r{i}", "Lily and Tom went to the park. They saw", GREEDY)
    for _ in range(3):
        engine.step()
    before = engine.stats()
    assert before.num_running > 0 and before.num_free_blocks < total
    engine.abort_request("r0")
    engine.abort_request("r1")
    after = engine.stats()
    assert after.num_free_blocks > before.num_free_blocks
    assert after.num_running + after.num_waiting == before.num_running + before.num_waiting - 2
    engine.abort_request("unknown-id")  # no-op
    done = _drain(engine)
    assert sorted(done) == ["r2", "r3", "r4", "r5"]
    stats = engine.stats()
    assert stats.num_free_blocks == total and stats.kv_usage == 0.0
    assert (stats.num_running, stats.num_waiting, stats.num_swapped) == (0, 0, 0)


def test_finish_reasons_and_counts(engine: LLMEngine) -> None:
    engine.add_request("free", "Once upon a time", GREEDY)
    free = _drain(engine)["free"]
    assert len(free) == 12
    stop_id = free[2]
    engine.add_request(
        "stop",
        "Once upon a time",
        SamplingParams(temperature=0.0, max_tokens=12, stop_token_ids=[stop_id]),
    )
    outs = []
    while engine.has_unfinished_requests():
        outs += engine.step()
    final = outs[-1]
    assert final.finished and final.finish_reason == "stop" and final.stop_reason == stop_id
    assert final.output_token_ids == free[: free.index(stop_id) + 1]  # the stop token is kept
    assert final.num_prompt_tokens == len(final.prompt_token_ids) == 6
    assert all(not o.finished and o.finish_reason is None for o in outs[:-1])
    # max_model_len caps generation: 64 - 6 prompt tokens = 58 output tokens at most.
    engine.add_request(
        "cap", "Once upon a time", SamplingParams(temperature=0.0, max_tokens=100, ignore_eos=True)
    )
    capped = []
    while engine.has_unfinished_requests():
        capped += engine.step()
    assert capped[-1].finish_reason == "length" and len(capped[-1].output_token_ids) == 58
    stats = engine.stats()
    assert stats.num_generated_tokens >= 12 + len(final.output_token_ids) + 58
    assert stats.prefix_cache_queries_tokens >= stats.prefix_cache_hits_tokens > 0
    assert 0.0 < stats.prefix_cache_hit_rate <= 1.0


def test_generate_accepts_one_prompt_or_many(tinystories_dir: Path) -> None:
    llm = LLM(tinystories_dir, dtype="float32")
    [single] = llm.generate("Once upon a time", GREEDY)
    by_ids = llm.generate(llm.tokenizer.encode("Once upon a time"), GREEDY)
    assert [o.output_token_ids for o in by_ids] == [single.output_token_ids]
    many = llm.generate(
        ["Once upon a time", "The dog"], [GREEDY, SamplingParams(temperature=0.0, max_tokens=3)]
    )
    assert many[0].output_token_ids == single.output_token_ids
    assert len(many[1].output_token_ids) == 3
    with pytest.raises(InvalidRequestError, match="2 SamplingParams for 3 prompts"):
        llm.generate(["a", "b", "c"], [GREEDY, GREEDY])


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_cpu_swap_pool_exists_only_in_swap_mode(tinystories_dir: Path, mode: str) -> None:
    """num_cpu_blocks is allocated for preemption_mode='swap' only; recompute never swaps."""
    llm = LLM(
        tinystories_dir, dtype="float32", num_blocks=16, num_cpu_blocks=8, preemption_mode=mode
    )
    runner = llm.engine.runner
    pool = sum(
        t.numel() * t.element_size() for c in runner.cpu_kv_caches for t in (c.k_cache, c.v_cache)
    )
    assert pool == (8 * runner.bytes_per_block if mode == "swap" else 0)
