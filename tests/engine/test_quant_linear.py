"""Weight-only int8 / int4 linears (engine/models/quant_linear.py, ``weight_dtype``).

Kernel outputs are compared with an independent float dequantisation of the same weights; the
whole-model effect is the top-1 agreement of the quantised model's logits with the fp32 model's
over every position of a prompt (figures in docs/engine.md, "Weight-only quantisation").
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from engine_support import prefill_logits
from torch import nn

from promptcache.engine import LLM, EngineConfig
from promptcache.engine.models.quant_linear import (
    INT4_GROUP_SIZE,
    Int4Linear,
    Int8Linear,
    quantize_linears,
)
from promptcache.errors import ConfigError

#: Lowest top-1 agreement with fp32 accepted per setting (measured values in docs/engine.md).
SMOLLM2_MIN_AGREEMENT = {"int8": 0.92, "int4": 0.93}
TINYSTORIES_MIN_AGREEMENT = {"int8": 0.95, "int4": 0.78}


def _bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).float()


def test_int8_matches_per_channel_dequantisation() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(96, 40, bias=True)
    layer = Int8Linear(linear)
    w = linear.weight.detach()
    scale = w.abs().amax(dim=1) / 127
    ref = torch.round(w / scale[:, None]).clamp(-127, 127) * _bf16(scale)[:, None]
    x = torch.randn(5, 96)
    expected = _bf16(x) @ ref.t() + linear.bias.detach()
    torch.testing.assert_close(layer(x), expected, atol=2e-2, rtol=2e-2)
    assert layer.qweight.dtype == torch.int8 and layer(x[:, None]).shape == (5, 1, 40)


def test_int4_stores_a_q4_1_grid_again() -> None:
    """Weights on llama.cpp's Q4_1 grid (w = d * q + m per 32, q reaching 0 and 15) come back."""
    gen = torch.Generator().manual_seed(1)
    out_f, in_f = 48, 128
    groups = in_f // INT4_GROUP_SIZE
    q = torch.randint(0, 16, (out_f, groups, INT4_GROUP_SIZE), generator=gen).float()
    q[..., 0], q[..., 1] = 0, 15
    d = torch.rand(out_f, groups, 1, generator=gen) * 0.01 + 0.001
    m = -8 * d + torch.randn(out_f, groups, 1, generator=gen) * 0.001
    w = (d * q + m).reshape(out_f, in_f)
    linear = nn.Linear(in_f, out_f, bias=False)
    linear.weight.data.copy_(w)
    layer = Int4Linear(linear)
    x = torch.randn(20, in_f, generator=gen)  # more rows than one decode step
    expected = _bf16(x) @ w.t()
    # Only the bf16 rounding of d and m (relative 2^-9) separates the two.
    torch.testing.assert_close(layer(x), expected, atol=5e-3, rtol=1e-2)
    assert layer.qweight.numel() * layer.qweight.element_size() == out_f * in_f // 2


def test_int4_refuses_a_ragged_layer_and_unknown_names() -> None:
    with pytest.raises(ConfigError, match="multiples of 32"):
        Int4Linear(nn.Linear(40, 16))
    with pytest.raises(ConfigError, match="weight_dtype must be one of"):
        quantize_linears(nn.Sequential(nn.Linear(32, 32)), "int2")
    with pytest.raises(ConfigError, match="weight_dtype"):
        EngineConfig(weight_dtype="float8")
    with pytest.raises(ConfigError, match="CPU weight-only kernels"):
        EngineConfig(weight_dtype="int4", device="cuda")


def top1_agreement(llm: LLM, ids: list[int], weight_dtype: str) -> float:
    """Share of positions where the ``weight_dtype`` copy of ``llm``'s model picks fp32's top-1."""
    runner = llm.engine.runner
    reference = prefill_logits(runner.model, runner.model_config, ids).argmax(-1)
    quantised = copy.deepcopy(runner.model)
    quantize_linears(quantised, weight_dtype)
    picks = prefill_logits(quantised, runner.model_config, ids).argmax(-1)
    return float((picks == reference).float().mean())


def _ids(llm: LLM, text: str, n: int) -> list[int]:
    ids = llm.tokenizer.encode(text)
    while len(ids) < n:
        ids += ids
    return ids[:n]


@pytest.mark.parametrize("weight_dtype", ["int8", "int4"])
def test_tinystories_top1_agreement(
    tinystories_dir: Path, prompts: list[str], weight_dtype: str
) -> None:
    llm = LLM(tinystories_dir, dtype="float32", num_blocks=8)
    ids = _ids(llm, " ".join(prompts), 384)
    assert top1_agreement(llm, ids, weight_dtype) >= TINYSTORIES_MIN_AGREEMENT[weight_dtype]


@pytest.mark.parametrize("weight_dtype", ["int8", "int4"])
def test_smollm2_top1_agreement(smollm2_llm: LLM, weight_dtype: str) -> None:
    text = Path(__file__).resolve().parents[2].joinpath("docs", "engine.md").read_text()
    ids = _ids(smollm2_llm, text, 512)
    assert top1_agreement(smollm2_llm, ids, weight_dtype) >= SMOLLM2_MIN_AGREEMENT[weight_dtype]


def test_weight_dtype_reaches_the_model(tinystories_dir: Path) -> None:
    """``LLM(weight_dtype="int4")`` runs int4 decoder layers and an int8 head, and generates."""
    from promptcache.engine import SamplingParams

    llm = LLM(tinystories_dir, dtype="float32", num_blocks=16, weight_dtype="int4")
    model = llm.engine.runner.model
    assert isinstance(model.layers[0].mlp.gate_up_proj, Int4Linear)
    assert isinstance(model.lm_head, Int8Linear)
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    [out] = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=8))
    assert len(out.output_token_ids) == 8
