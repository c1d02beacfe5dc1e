"""RoPE (``models/rope.py``) against transformers' Llama rotary embedding, bit for bit.

``apply_rotary`` computes ``x * cos + roll(x, d / 2) * signed_sin`` where transformers computes
``x * cos + rotate_half(x) * sin``; the two must agree exactly (same roundings, same order), for
fp32 and bf16, over positions spread across the table, for the static rope types.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from promptcache.engine.models.rope import RotaryEmbedding, apply_rotary

HEAD_DIM, HEADS, MAX_POSITIONS = 64, 5, 4096
SCALINGS: list[dict[str, Any] | None] = [
    None,
    {"rope_type": "linear", "factor": 4.0},
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 1024,
    },
]


@pytest.mark.parametrize("scaling", SCALINGS, ids=["default", "linear", "llama3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotation_equals_transformers(scaling: dict[str, Any] | None, dtype: torch.dtype) -> None:
    # Imported here, not at collection: importing transformers' Llama module at collection time
    # broke the Triton interpreter for tests/kernels later in the same session.
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (
        LlamaRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    config = LlamaConfig(
        hidden_size=HEAD_DIM * HEADS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=100000.0,
        rope_scaling=scaling,
    )
    gen = torch.Generator().manual_seed(3)
    positions = torch.cat([torch.arange(8), torch.randint(0, MAX_POSITIONS, (24,), generator=gen)])
    x = torch.randn(positions.shape[0], HEADS, HEAD_DIM, generator=gen).to(dtype)

    hf_cos, hf_sin = LlamaRotaryEmbedding(config)(x, positions[None])  # [1, n, d]
    hf_q, _ = apply_rotary_pos_emb(x.transpose(0, 1)[None], x.transpose(0, 1)[None], hf_cos, hf_sin)
    expected = hf_q[0].transpose(0, 1)  # back to [n, heads, d]

    ours = RotaryEmbedding(HEAD_DIM, 100000.0, scaling, MAX_POSITIONS, MAX_POSITIONS)
    cos, signed_sin = ours(positions, dtype)
    got = apply_rotary(x, cos, signed_sin)
    assert got.dtype == expected.dtype
    assert torch.equal(got, expected)


def test_non_contiguous_input_rotates_like_a_copy() -> None:
    """The model rotates q and k as a slice of the fused projection's output."""
    gen = torch.Generator().manual_seed(4)
    fused = torch.randn(3, 2 * HEADS, HEAD_DIM, generator=gen)
    rope = RotaryEmbedding(HEAD_DIM, 10000.0, None, 64, 64)
    cos, signed_sin = rope(torch.tensor([0, 7, 63]), torch.float32)
    view = fused[:, :HEADS]
    assert torch.equal(
        apply_rotary(view, cos, signed_sin), apply_rotary(view.clone(), cos, signed_sin)
    )


@pytest.mark.parametrize("scaling", SCALINGS, ids=["default", "linear", "llama3"])
def test_halved_tables_give_the_full_rows_bit_for_bit(scaling: dict[str, Any] | None) -> None:
    """Each row's two halves are the same angles: the tables keep one half where the halves are
    the same bits, and ``forward`` gives back the full rows computed independently here."""
    from promptcache.engine.models.rope import rope_inv_freq

    ours = RotaryEmbedding(HEAD_DIM, 100000.0, scaling, MAX_POSITIONS, MAX_POSITIONS)
    freqs = torch.arange(MAX_POSITIONS, dtype=torch.float)[:, None] * rope_inv_freq(
        HEAD_DIM, 100000.0, scaling
    )
    emb = torch.cat((freqs, freqs), -1)
    sin = emb.sin()
    half = HEAD_DIM // 2
    full_halves_equal = torch.equal(emb.cos()[:, :half], emb.cos()[:, half:]) and torch.equal(
        sin[:, :half], sin[:, half:]
    )
    assert ours.halved == full_halves_equal
    assert ours.cos_table.shape == (MAX_POSITIONS, half if ours.halved else HEAD_DIM)
    positions = torch.arange(MAX_POSITIONS)
    cos, signed_sin = ours(positions, torch.float32)
    assert torch.equal(cos[:, 0], emb.cos())
    assert torch.equal(signed_sin[:, 0], torch.cat((-sin[:, :half], sin[:, half:]), -1))
