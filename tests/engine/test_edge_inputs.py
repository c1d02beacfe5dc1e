"""Edge inputs a new user hits: huge seeds, bad devices, odd prompt lists, configs without
``architectures``. Each must end in a typed error that says what to change, never in a
ValueError/AssertionError from torch halfway through a step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch  # loaded up front so the engine fixtures pin it to one thread

from promptcache.engine import LLM, EngineConfig, ModelConfig, SamplingParams
from promptcache.errors import ConfigError, InvalidRequestError, ModelLoadError


@pytest.fixture(scope="module")
def llm(tinystories_dir: Path) -> LLM:
    return LLM(tinystories_dir, dtype="float32", block_size=4, num_blocks=32, max_model_len=32)


def test_seed_beyond_64_bits_is_rejected_up_front() -> None:
    with pytest.raises(InvalidRequestError, match="seed must be <="):
        SamplingParams(seed=2**64)
    with pytest.raises(ConfigError, match="seed must be <="):
        EngineConfig(seed=2**64)


def test_largest_seed_with_n_samples_generates(llm: LLM) -> None:
    # seed + sample_index must stay a valid torch seed for every sample.
    params = SamplingParams(seed=2**63 - 1, n=2, max_tokens=2)
    first = llm.generate("Once upon a time", params)
    again = llm.generate("Once upon a time", params)
    assert [o.output_token_ids for o in first] == [o.output_token_ids for o in again]
    assert not llm.engine.has_unfinished_requests()


def test_prompt_lists_with_non_int_items_are_rejected(llm: LLM) -> None:
    for bad in ([[1, "5"]], [[1, 5.7]], [[True, 5]]):
        with pytest.raises(InvalidRequestError):
            llm.generate(bad, SamplingParams(temperature=0, max_tokens=1))  # type: ignore[arg-type]
    assert not llm.engine.has_unfinished_requests()


@pytest.mark.parametrize("device", ["bogus", "cuda:99" if torch.cuda.is_available() else "cuda"])
def test_unusable_device_is_a_config_error(tinystories_dir: Path, device: str) -> None:
    with pytest.raises(ConfigError, match="device"):
        LLM(tinystories_dir, device=device)


def test_config_without_architectures_falls_back_to_model_type(tinystories_dir: Path) -> None:
    raw = json.loads((tinystories_dir / "config.json").read_text())
    del raw["architectures"]
    assert ModelConfig.from_dict(raw).architecture == "LlamaForCausalLM"
    raw["model_type"] = "gpt2"
    with pytest.raises(ModelLoadError, match="'gpt2' is not supported"):
        ModelConfig.from_dict(raw)
