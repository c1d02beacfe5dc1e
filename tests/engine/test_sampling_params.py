"""SamplingParams and EngineConfig validation: typed errors whose messages say what to change."""

from __future__ import annotations

import math

import pytest

from promptcache.engine.config import EngineConfig
from promptcache.engine.sampling_params import MAX_LOGPROBS, MAX_TOP_K, SamplingParams
from promptcache.errors import ConfigError, InvalidRequestError


def test_defaults_and_normalised_views() -> None:
    params = SamplingParams(stop="###", stop_token_ids=[7, 7, 9], top_k=-1)
    assert params.stop_strings == ("###",)
    assert params.stop_token_id_set == frozenset({7, 9})
    assert params.top_k == 0  # -1 is vLLM's spelling of "off"
    assert not params.is_greedy and not params.has_penalties
    assert SamplingParams(stop=["a", "bc"]).stop_strings == ("a", "bc")


def test_temperature_zero_is_greedy() -> None:
    assert SamplingParams(temperature=0).is_greedy
    assert SamplingParams(temperature=0.0, n=3).is_greedy
    assert not SamplingParams(temperature=0.7).is_greedy
    assert SamplingParams(frequency_penalty=0.5).has_penalties


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 0}, "n must be >= 1"),
        ({"n": 1.5}, "n must be an integer"),
        ({"n": True}, "n must be an integer"),
        ({"temperature": -0.1}, r"temperature must be in \[0.0, inf\)"),
        ({"temperature": math.nan}, "temperature must be a finite number"),
        ({"temperature": "hot"}, "temperature must be a number"),
        ({"top_k": -2}, "use 0 or -1 to disable top-k"),
        ({"top_k": 2**63}, f"top_k must be <= {MAX_TOP_K}"),
        ({"top_p": 0.0}, r"top_p must be in \(0.0, 1.0\]"),
        ({"top_p": 1.5}, "top_p must be in"),
        ({"min_p": 1.1}, r"min_p must be in \[0.0, 1.0\]"),
        ({"repetition_penalty": 0.0}, "repetition_penalty must be in"),
        ({"presence_penalty": 2.5}, r"presence_penalty must be in \[-2.0, 2.0\]"),
        ({"frequency_penalty": -3}, "frequency_penalty must be in"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"max_tokens": 0}, "max_tokens must be >= 1"),
        ({"logprobs": MAX_LOGPROBS + 1}, f"logprobs must be at most {MAX_LOGPROBS}"),
        ({"logprobs": -1}, "logprobs must be >= 0"),
        ({"stop": [""]}, "non-empty string"),
        ({"stop": 5}, "stop must be a string or a list"),
        ({"stop_token_ids": [-1]}, "non-negative integers"),
        ({"stop_token_ids": "7"}, "stop_token_ids must be a list"),
        ({"ignore_eos": "yes"}, "ignore_eos must be true or false"),
    ],
)
def test_invalid_values_raise_invalid_request(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        SamplingParams(**kwargs)


def test_invalid_request_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        SamplingParams(top_p=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block_size": 0}, "block_size must be >= 1"),
        ({"dtype": "float64"}, "dtype must be one of auto, float32"),
        ({"kv_cache_dtype": "int4"}, "kv_cache_dtype must be one of"),
        ({"attention_backend": "flash"}, "attention_backend must be one of torch, triton"),
        ({"preemption_mode": "drop"}, "preemption_mode must be one of recompute, swap"),
        ({"preemption_mode": "swap"}, "set num_cpu_blocks > 0"),
        ({"max_model_len": 1}, "max_model_len must be >= 2"),
        ({"num_blocks": 0}, "num_blocks must be >= 1"),
        ({"max_num_seqs": 2.0}, "max_num_seqs must be an integer"),
        ({"enable_prefix_caching": "yes"}, "enable_prefix_caching must be true or false"),
    ],
)
def test_engine_config_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        EngineConfig(**kwargs)


def test_engine_config_block_table_width() -> None:
    assert EngineConfig(max_model_len=33, block_size=16).max_blocks_per_seq() == 3
    with pytest.raises(ConfigError, match="max_model_len is not set"):
        EngineConfig().max_blocks_per_seq()
