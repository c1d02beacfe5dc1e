"""store_kv against its reference (bit for bit), and the quantisation rounding rules."""

from __future__ import annotations

import pytest
import torch
from kernel_inputs import QUANTIZED, dtype_name, randn

from promptcache.errors import KernelInputError
from promptcache.kernels import store_kv
from promptcache.kernels._checks import check_device
from promptcache.kernels.reference import quantize_ref, store_kv_ref

# (k/v dtype, cache dtype, num_kv_heads, head_dim, block_size)
CASES = [
    (torch.float32, torch.float32, 2, 16, 16),
    (torch.bfloat16, torch.bfloat16, 4, 64, 8),
    (torch.float16, torch.float16, 1, 128, 16),
    (torch.float32, torch.bfloat16, 2, 64, 16),  # cast on store
    (torch.bfloat16, torch.int8, 3, 64, 16),  # 3 kv heads: a non-power-of-two tile
    (torch.float32, torch.float8_e4m3fn, 8, 16, 32),
]


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A view that compares bit patterns (NaN-safe, works for float8)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{dtype_name(c[0])}-to-{dtype_name(c[1])}")
def test_matches_reference_bit_for_bit(
    case: tuple[torch.dtype, torch.dtype, int, int, int], gen: torch.Generator
) -> None:
    kv_dtype, cache_dtype, num_kv_heads, head_dim, block_size = case
    num_blocks, num_tokens = 7, 40
    # k and v as strided views of one fused tensor, as the model produces them
    kv = randn((num_tokens, 2 * num_kv_heads + 1, head_dim), gen, kv_dtype) * 4
    k, v = kv[:, :num_kv_heads], kv[:, num_kv_heads : 2 * num_kv_heads]
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:num_tokens]
    slots[torch.randperm(num_tokens, generator=gen)[:5]] = -1  # five tokens are not stored
    scales: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)
    if cache_dtype in QUANTIZED:
        scales = (torch.rand(num_kv_heads, generator=gen) * 0.05 + 0.01,
                  torch.rand(num_kv_heads, generator=gen) * 0.05 + 0.01)  # fmt: skip
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = randn(shape, gen, torch.float32).to(cache_dtype)
    v_cache = randn(shape, gen, torch.float32).to(cache_dtype)
    k_expected, v_expected = k_cache.clone(), v_cache.clone()

    store_kv(k, v, k_cache, v_cache, slots, *scales)
    store_kv_ref(k, v, k_expected, v_expected, slots, *scales)

    assert torch.equal(_bits(k_cache), _bits(k_expected))
    assert torch.equal(_bits(v_cache), _bits(v_expected))


def _e4m3_midpoints_and_edges() -> torch.Tensor:
    """Every positive finite e4m3fn value, the midpoints between neighbours (ties), values just
    off the midpoints, values beyond 448, and their negatives."""
    codes = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()  # 0..448
    mids = (codes[:-1] + codes[1:]) / 2
    nudged = torch.cat([mids * (1 + 2**-20), mids * (1 - 2**-20)])
    big = torch.tensor([449.0, 464.0, 470.0, 1e6])
    values = torch.cat([codes, mids, nudged, big])
    return torch.cat([values, -values])


@pytest.mark.parametrize("cache_dtype", QUANTIZED, ids=dtype_name)
def test_rounding_ties_to_even_and_saturates(cache_dtype: torch.dtype) -> None:
    if cache_dtype == torch.int8:
        base = torch.arange(-130, 131, dtype=torch.float32)
        values = torch.cat([base, base + 0.5, base + 0.49, base + 0.51])
    else:
        values = _e4m3_midpoints_and_edges()
    values = values[: (values.numel() // 16) * 16]
    x = values.view(-1, 1, 16)  # one kv head, head_dim 16, one token per row
    cache = torch.empty((x.shape[0], 1, 1, 16), dtype=cache_dtype)
    scale = torch.ones(1)
    slots = torch.arange(x.shape[0])
    store_kv(x, x, cache, cache.clone(), slots, scale, scale)
    expected = quantize_ref(x, scale, cache_dtype)
    assert torch.equal(_bits(cache.view(-1, 1, 16)), _bits(expected))
    assert cache.float().abs().max() == (127 if cache_dtype == torch.int8 else 448)


def test_tokens_with_slot_minus_one_are_not_written(gen: torch.Generator) -> None:
    k = randn((4, 1, 16), gen, torch.float32)
    k_cache = torch.full((2, 4, 1, 16), 7.0)
    v_cache = k_cache.clone()
    store_kv(k, k, k_cache, v_cache, torch.tensor([-1, 5, -1, 0]))
    flat = k_cache.view(-1, 1, 16)
    assert torch.equal(flat[5], k[1]) and torch.equal(flat[0], k[3])
    untouched = [i for i in range(8) if i not in (0, 5)]
    assert (flat[untouched] == 7.0).all()


def _store_args() -> dict[str, object]:
    return {
        "k": torch.ones(3, 2, 16),
        "v": torch.ones(3, 2, 16),
        "k_cache": torch.zeros(4, 8, 2, 16),
        "v_cache": torch.zeros(4, 8, 2, 16),
        "slot_mapping": torch.tensor([0, 9, 31]),
    }


BAD_INPUTS = [
    ("k-heads", {"k": torch.ones(3, 3, 16)}, r"k must have shape \[num_tokens, num_kv_heads"),
    ("v-dtype", {"v": torch.ones(3, 2, 16, dtype=torch.float16)}, r"v has dtype float16"),
    ("slot-dtype", {"slot_mapping": torch.tensor([0.0, 1.0, 2.0])}, r"slot_mapping has dtype"),
    ("slot-range", {"slot_mapping": torch.tensor([0, 1, 32])}, r"valid slots are -1 \(skip\)"),
    ("cache-dtype", {"k_cache": torch.zeros(4, 8, 2, 16, dtype=torch.float64)},
     r"k_cache has dtype float64"),
    ("pair", {"v_cache": torch.zeros(4, 8, 2, 16, dtype=torch.float16)}, r"v_cache has dtype"),
    ("no-scales", {"k_cache": torch.zeros(4, 8, 2, 16, dtype=torch.int8),
                   "v_cache": torch.zeros(4, 8, 2, 16, dtype=torch.int8)}, r"pass k_scale"),
    ("scale-shape", {"k_cache": torch.zeros(4, 8, 2, 16, dtype=torch.int8),
                     "v_cache": torch.zeros(4, 8, 2, 16, dtype=torch.int8),
                     "k_scale": torch.ones(3), "v_scale": torch.ones(2)},
     r"k_scale must have shape \[num_kv_heads\]"),
    ("scale-sign", {"k_cache": torch.zeros(4, 8, 2, 16, dtype=torch.int8),
                    "v_cache": torch.zeros(4, 8, 2, 16, dtype=torch.int8),
                    "k_scale": torch.ones(2), "v_scale": -torch.ones(2)}, r"must be positive"),
    ("not-a-tensor", {"k": [[1.0]]}, r"k must be a torch.Tensor"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), [b[1:] for b in BAD_INPUTS],
                         ids=[b[0] for b in BAD_INPUTS])  # fmt: skip
def test_rejects_bad_input_with_a_clear_error(change: dict[str, object], message: str) -> None:
    args = _store_args() | change
    with pytest.raises(KernelInputError, match=message):
        store_kv(**args)  # type: ignore[arg-type]


def test_cpu_tensors_need_the_interpreter() -> None:
    compiled_kernel = object()  # anything that is not an interpreted @triton.jit function
    with pytest.raises(KernelInputError, match="set TRITON_INTERPRET=1"):
        check_device(compiled_kernel, q=torch.ones(1))
