"""``gguf_weights.dequantize_tensor`` on small synthetic tensors of every supported GGML type:
equal to ``gguf.quants.dequantize`` (llama.cpp's reference), close to the values quantised, and
for Q8_0 / Q4_0 / Q4_1 equal to the block formulas decoded here in float64."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import dequantize, quantize

from promptcache.engine.gguf_weights import SUPPORTED_TYPES, dequantize_tensor
from promptcache.errors import ModelLoadError

# Types gguf.quants can quantise, with the worst error per element relative to the block's
# largest magnitude (half a quantisation step: 1/127 for 8 bits, 1/7 for 4 bits...).
QUANTISABLE = {
    "F16": 1e-3,
    "BF16": 1e-2,
    "Q8_0": 1 / 127,
    "Q5_0": 1 / 15,
    "Q5_1": 1 / 31,
    "Q4_0": 1 / 7,
    "Q4_1": 1 / 15,
}
# K-quants (gguf.quants only dequantises them): byte offsets of the fp16 super-block scales
# (``d`` and, where there is one, ``dmin``) in llama.cpp's block_qN_K structs (ggml-common.h).
K_SCALE_OFFSETS = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


def _values(rows: int = 4, cols: int = 256) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)


def test_every_supported_type_is_covered() -> None:
    assert set(SUPPORTED_TYPES) == {"F32", *QUANTISABLE, *K_SCALE_OFFSETS}


@pytest.mark.parametrize("type_name", list(QUANTISABLE))
def test_quantised_values_round_trip(type_name: str) -> None:
    x = _values()
    qtype = gguf.GGMLQuantizationType[type_name]
    stored = quantize(x, qtype)
    ours = dequantize_tensor(stored, type_name, "w", torch.float32)
    assert ours.shape == (4, 256) and ours.dtype == torch.float32
    assert torch.equal(ours, torch.from_numpy(dequantize(stored, qtype)))
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    scale = np.abs(x.reshape(4, -1, block)).max(axis=-1, keepdims=True)
    error = np.abs(ours.numpy() - x).reshape(4, -1, block)
    assert (error <= scale * QUANTISABLE[type_name] + 1e-6).all()
    half = dequantize_tensor(stored, type_name, "w", torch.bfloat16)
    assert half.dtype == torch.bfloat16 and torch.equal(half, ours.to(torch.bfloat16))


def _f16(raw: np.ndarray) -> np.ndarray:
    return raw[..., :2].copy().view(np.float16).astype(np.float64)[..., 0]


@pytest.mark.parametrize("type_name", ["Q8_0", "Q4_0", "Q4_1"])
def test_block_formulas(type_name: str) -> None:
    """Decode the blocks by llama.cpp's formulas (ggml-quants.c dequantize_row_*), in float64."""
    stored = quantize(_values(2, 64), gguf.GGMLQuantizationType[type_name])
    blocks = stored.reshape(-1, stored.shape[-1] // 2)  # two 32-element blocks per row
    d = _f16(blocks)
    if type_name == "Q8_0":  # fp16 d, then 32 int8
        expected = d[:, None] * blocks[:, 2:].view(np.int8).astype(np.float64)
    else:
        start = 2 if type_name == "Q4_0" else 4  # Q4_1 adds an fp16 minimum m
        packed = blocks[:, start:]
        q = np.concatenate([packed & 0x0F, packed >> 4], axis=1).astype(np.float64)  # 32 nibbles
        if type_name == "Q4_0":
            expected = d[:, None] * (q - 8)
        else:
            expected = d[:, None] * q + _f16(blocks[:, 2:4])[:, None]
    ours = dequantize_tensor(stored, type_name, "w", torch.float64)
    np.testing.assert_allclose(ours.numpy().reshape(-1, 32), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("type_name", list(K_SCALE_OFFSETS))
def test_k_quants_match_gguf_reference(type_name: str) -> None:
    qtype = gguf.GGMLQuantizationType[type_name]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = np.random.default_rng(1).integers(0, 256, (3, 2 * size), dtype=np.uint8)
    blocks = raw.reshape(6, size)
    for offset in K_SCALE_OFFSETS[type_name]:  # finite scales instead of random fp16 bits
        blocks[:, offset : offset + 2] = np.array([0.01], np.float16).view(np.uint8)
    ours = dequantize_tensor(raw, type_name, "w", torch.float32)
    assert ours.shape == (3, 2 * block)
    assert torch.isfinite(ours).all() and ours.abs().sum() > 0
    assert torch.equal(ours, torch.from_numpy(dequantize(raw, qtype)))


def test_f32_values_are_copied_not_shared() -> None:
    x = _values(2, 8)
    ours = dequantize_tensor(x, "F32", "w", torch.float32)
    ours.add_(1)
    assert np.array_equal(x, _values(2, 8))


@pytest.mark.parametrize("type_name", ["IQ4_NL", "TQ1_0", "MXFP4", "F64"])
def test_other_types_are_refused_by_name(type_name: str) -> None:
    with pytest.raises(ModelLoadError, match=rf"'w\.q' has GGML type {type_name}"):
        dequantize_tensor(np.zeros((1, 8), np.uint8), type_name, "w.q", torch.float32)


@pytest.mark.parametrize("type_name", ["Q8_0", "Q4_1"])
def test_values_written_into_a_given_tensor_are_the_same(type_name: str) -> None:
    """``out=``: the loader dequantises the vocabulary straight into the model's matrix; the
    values, over several row chunks and a partial last one, equal gguf's own dequantisation."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2_500, 64)).astype(np.float32)  # 2 full chunks of 1,024 and 452
    qtype = gguf.GGMLQuantizationType[type_name]
    stored = quantize(x, qtype)
    out = torch.full((2_500, 64), float("nan"))
    result = dequantize_tensor(stored, type_name, "w", torch.float32, out)
    assert result.data_ptr() == out.data_ptr()
    assert torch.equal(out, torch.from_numpy(dequantize(stored, qtype)))
    assert torch.equal(dequantize_tensor(stored, type_name, "w", torch.float32), out)
