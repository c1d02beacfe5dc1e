"""SmolLM2-135M-Instruct loaded from its GGUF file by our loader generates, greedily and in fp32,
the same token ids as transformers' own GGUF loading of the same file: the chat question of
issue #16 and a ~1,000-token prompt, cold and then warm (served from the prefix cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from gguf_support import CAPITAL_MESSAGES

from promptcache.engine import SamplingParams

# Real instructions (not a repeated word), so the prompt tokenises like text a user sends.
_RULES = [
    "Answer in plain English, in short sentences, and never invent facts you are not sure of.",
    "When the question is about geography, name the country and the continent first.",
    "If a user asks for code, give a complete Python function with type hints and a docstring.",
    "Use metric units (km, kg, degrees Celsius) unless the user writes imperial units first.",
    "Quote dates as 14 July 1789, and numbers above 9,999 with thousands separators.",
    "Refuse politely when asked for medical dosages, and suggest asking a pharmacist instead.",
    "Keep lists to at most five items; say how many items were left out when there are more.",
    "Translate only when asked, and give the source language's name in the target language.",
]


def _long_messages(tokenizer: Any, target_tokens: int = 1000) -> list[dict[str, str]]:
    """A system prompt of numbered rules grown to about ``target_tokens`` chat tokens (counted
    with our tokenizer; ``_prompt_ids`` checks transformers' count is the same)."""
    rules: list[str] = []
    while True:
        rules.append(f"Rule {len(rules) + 1}: {_RULES[len(rules) % len(_RULES)]}")
        messages = [
            {"role": "system", "content": "\n".join(rules)},
            {"role": "user", "content": "Which rule tells you how to write dates?"},
        ]
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        if len(tokenizer.encode(text, add_special_tokens=False)) >= target_tokens:
            return messages


def _hf_greedy(model: Any, ids: list[int], max_new_tokens: int) -> list[int]:
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_new_tokens,
            do_sample=False,
        )
    return [int(t) for t in out[0, len(ids) :]]


def _ours(llm: Any, ids: list[int], max_new_tokens: int) -> Any:
    [out] = llm.generate([ids], SamplingParams(temperature=0, max_tokens=max_new_tokens))
    return out


def _prompt_ids(llm: Any, hf_tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Our chat prompt ids, checked equal to transformers' rendering + tokenisation."""
    text = llm.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    ids = llm.tokenizer.encode(text, add_special_tokens=False)
    ref = hf_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == ref
    assert ids == list(hf_tokenizer(ref, add_special_tokens=False)["input_ids"])
    return ids


def test_capital_of_france_matches_transformers(
    smollm2_llm: Any, hf_smollm2_model: Any, hf_smollm2_tokenizer: Any
) -> None:
    ids = _prompt_ids(smollm2_llm, hf_smollm2_tokenizer, CAPITAL_MESSAGES)
    ref = _hf_greedy(hf_smollm2_model, ids, 16)
    smollm2_llm.engine.reset_prefix_cache()
    cold = _ours(smollm2_llm, ids, 16)
    assert cold.output_token_ids == ref
    assert cold.text == "The capital of France is Paris."
    assert cold.finish_reason == "stop"  # ended on <|im_end|>, the GGUF's EOS
    warm = _ours(smollm2_llm, ids, 16)
    block = smollm2_llm.engine.config.block_size
    assert warm.num_cached_tokens == (len(ids) - 1) // block * block > 0
    assert warm.output_token_ids == ref


def test_thousand_token_prompt_matches_transformers_cold_and_warm(
    smollm2_llm: Any, hf_smollm2_model: Any, hf_smollm2_tokenizer: Any
) -> None:
    messages = _long_messages(smollm2_llm.tokenizer)
    ids = _prompt_ids(smollm2_llm, hf_smollm2_tokenizer, messages)
    assert 1000 <= len(ids) < 1100
    ref = _hf_greedy(hf_smollm2_model, ids, 12)
    smollm2_llm.engine.reset_prefix_cache()
    cold = _ours(smollm2_llm, ids, 12)
    assert cold.num_cached_tokens == 0
    assert cold.output_token_ids == ref
    warm = _ours(smollm2_llm, ids, 12)
    block = smollm2_llm.engine.config.block_size
    assert warm.num_cached_tokens == (len(ids) - 1) // block * block
    assert warm.output_token_ids == ref


def test_config_comes_from_the_gguf_metadata(smollm2_gguf: Path) -> None:
    from promptcache.engine import ModelConfig
    from promptcache.engine.gguf_file import find_smollm2_gguf, is_gguf

    assert find_smollm2_gguf(required=True) == smollm2_gguf
    assert smollm2_gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and is_gguf(smollm2_gguf)
    assert smollm2_gguf.read_bytes()[:4] == b"GGUF"

    config = ModelConfig.from_pretrained(smollm2_gguf)
    # The SmolLM2-135M shape as issue #16 states it (30 layers, hidden 576, 9 heads, 3 KV heads,
    # vocab 49,152, 8k context); no output.weight in the file, so the LM head is tied.
    assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size) == (
        30,
        576,
        1536,
    )
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (9, 3, 64)
    assert (config.vocab_size, config.max_position_embeddings) == (49152, 8192)
    assert config.tie_word_embeddings
    assert config.rope_theta == pytest.approx(100000.0)
    assert config.rms_norm_eps == pytest.approx(1e-5)
    assert config.eos_token_ids == (2,) and config.bos_token_id == 1


def test_kv_size_of_the_smollm2_file(smollm2_gguf: Path) -> None:
    import json

    from click.testing import CliRunner

    from promptcache.cli import cli

    result = CliRunner().invoke(
        cli, ["engine", "kv-size", "--model", str(smollm2_gguf), "--tokens", "1000", "--json"]
    )
    assert result.exit_code == 0, result.output
    size = json.loads(result.output)
    # Issue #16's shape: 2 (K and V) x 30 layers x 3 KV heads x (576 / 9) x 2 bytes: the
    # Q4_1 file loads with int4 layers, so "auto" is float16 where the fused kernel serves
    # (float32, 4 bytes, on a CPU without AVX2 / FMA / F16C or without a C compiler).
    fused = size["fused_kernel_unavailable"] is None
    per_token = 2 * 30 * 3 * (576 // 9) * (2 if fused else 4)
    assert per_token == (23_040 if fused else 46_080)
    assert size["bytes_per_token"] == per_token
    assert size["bytes_per_request"] == 1000 * per_token
    assert size["kv_dtype"] == ("float16" if fused else "float32")
