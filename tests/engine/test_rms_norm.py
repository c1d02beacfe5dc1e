"""``models.llama.RMSNorm`` against transformers' ``LlamaRMSNorm``, bit for bit.

In fp32 our layer calls torch's fused ``F.rms_norm``; in bf16 / fp16 it spells out
transformers' steps (fp32 statistics, cast back, then the weight). Either way the output must
be the reference's exactly, since greedy decoding is compared with transformers token by token.
"""

from __future__ import annotations

import pytest
import torch

from promptcache.engine.models.llama import RMSNorm


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows", [1, 7, 300])
def test_rms_norm_equals_transformers_bit_for_bit(dtype: torch.dtype, rows: int) -> None:
    # Imported here, not at collection: importing transformers' Llama module at collection time
    # breaks the Triton interpreter for tests/kernels later in the session (as test_rope.py).
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    generator = torch.Generator().manual_seed(rows)
    hidden, eps = 576, 1e-5
    weight = torch.randn(hidden, generator=generator).to(dtype)
    # activations with a few large channels, as a trained model's residual stream has
    x = torch.randn(rows, hidden, generator=generator) * 3
    x[:, :4] *= 40
    x = x.to(dtype)
    ours, reference = RMSNorm(hidden, eps), LlamaRMSNorm(hidden, eps)
    with torch.no_grad():
        ours.weight.copy_(weight.float())
        reference.weight.copy_(weight.float())
    ours, reference = ours.to(dtype), reference.to(dtype)
    with torch.no_grad():
        got, expected = ours(x), reference(x)
    assert got.dtype == expected.dtype == dtype
    assert torch.equal(got, expected)


def test_rms_norm_of_a_zero_row_is_zero_not_nan() -> None:
    norm = RMSNorm(8, 1e-6)
    out = norm(torch.zeros(2, 8))
    assert torch.equal(out, torch.zeros(2, 8))
