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
from engine_support import SMOLLM2_MIN_AGREEMENT, TINYSTORIES_MIN_AGREEMENT, prefill_logits
from torch import nn

from promptcache.engine import LLM, EngineConfig
from promptcache.engine.models.quant_linear import (
    DENSE_DTYPE,
    DENSE_MIN_ROWS,
    HEAD_REFINE_TOP,
    INT4_GROUP_SIZE,
    PREPACK_DENSE,
    REFINE_ROWS,
    Int4Linear,
    Int8Embedding,
    Int8Linear,
    quantize_int4_groups,
    quantize_int8_rows,
    quantize_linears,
)
from promptcache.errors import ConfigError


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


def test_int4_packing_in_row_chunks_matches_its_dequantised_values() -> None:
    """A weight taller than one packing chunk (4,096 rows): the kernel multiplies by exactly the
    ``values`` returned alongside, row for row, across the chunk boundary."""
    gen = torch.Generator().manual_seed(5)
    weight = torch.randn(4096 + 48, 64, generator=gen)
    packed, sz, values = quantize_int4_groups(weight, with_values=True)
    assert values is not None and packed.shape == (4096 + 48, 32) and sz.shape == (2, 4096 + 48, 2)
    x = torch.randn(3, 64, generator=gen)
    got = torch._weight_int4pack_mm_for_cpu(x.bfloat16(), packed, INT4_GROUP_SIZE, sz).float()
    torch.testing.assert_close(got, _bf16(x) @ values.t(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(values, weight, atol=0.35, rtol=0)  # a 16-step grid per 32


@pytest.mark.parametrize("kind", [Int8Linear, Int4Linear])
def test_dense_copy_matches_the_kernel_on_either_side_of_the_cut_over(kind: type) -> None:
    """Below ``DENSE_MIN_ROWS`` rows the kernel runs, from it the dense copy: same values."""
    torch.manual_seed(2)
    linear = nn.Linear(128, 80, bias=True)
    layer = kind(linear)
    kernel_only = kind(linear, dense_min_rows=None)
    assert kernel_only.dense is None and layer.dense.dtype == DENSE_DTYPE
    for rows in (1, DENSE_MIN_ROWS - 1, DENSE_MIN_ROWS, 3 * DENSE_MIN_ROWS + 5):
        x = torch.randn(rows, 128)
        got, kernel = layer(x), kernel_only(x)
        if rows < DENSE_MIN_ROWS:
            assert torch.equal(got, kernel)  # the very same kernel call
        else:
            # The dense copy holds the kernel's dequantised values (in bf16: rounded, 2^-9); the
            # kernel rounds its bf16 inputs and output.
            torch.testing.assert_close(got, kernel, atol=2e-2, rtol=2e-2)
            assert not torch.equal(got, kernel)  # it is another computation
            # prepacked for oneDNN or not, the GEMM over the plain matrix: the same one in bf16
            # (oneDNN either way), MKL's against oneDNN's fp32 sums in fp32
            plain = layer.dense.to_dense() if layer.dense.is_mkldnn else layer.dense
            expected = (x.to(DENSE_DTYPE) @ plain.t()).float() + linear.bias.detach()
            if DENSE_DTYPE is torch.bfloat16:
                assert torch.equal(got, expected)
            else:
                torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert layer.dense.is_mkldnn == PREPACK_DENSE


def test_dense_copies_are_bf16_only_where_onednn_runs_bf16_natively() -> None:
    """On a CPU without AVX-512 (or AVX-NE-CONVERT) oneDNN refuses to prepack a bf16 weight and
    emulates bf16 GEMMs; the dense copies are then fp32, prepacked for oneDNN all the same."""
    native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert DENSE_DTYPE is (torch.bfloat16 if native else torch.float32)
    assert PREPACK_DENSE is torch.backends.mkldnn.is_available()
    assert (16 if native else 24 if PREPACK_DENSE else 64) == DENSE_MIN_ROWS
    torch.manual_seed(3)
    linear = nn.Linear(64, 32)
    layer = Int4Linear(linear)
    assert layer.dense is not None and layer.dense.dtype == DENSE_DTYPE
    assert layer.dense.is_mkldnn == PREPACK_DENSE
    values = quantize_int4_groups(linear.weight.detach(), with_values=True)[2]
    assert values is not None
    x = torch.randn(DENSE_MIN_ROWS, 64)
    expected = (x.to(DENSE_DTYPE) @ values.to(DENSE_DTYPE).t()).float() + linear.bias.detach()
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", [Int8Linear, Int4Linear])
@pytest.mark.parametrize("rows", [1, 2, DENSE_MIN_ROWS - 1, DENSE_MIN_ROWS])
def test_strided_bf16_rows_reach_the_kernel(kind: type, rows: int) -> None:
    """A bf16 model feeds ``down_proj`` a product over a slice of ``gate_up``: strided rows,
    which ``.to(bfloat16)`` does not copy. Every path takes them (the int4 kernel used to raise
    "expect A to be contiguous" for 2-15 rows)."""
    torch.manual_seed(6)
    layer = kind(nn.Linear(64, 32, bias=False))
    wide = torch.randn(rows, 128).bfloat16()
    strided = wide[:, ::2]
    assert not strided.is_contiguous()
    assert torch.equal(layer(strided), layer(strided.contiguous()))


def test_head_refines_its_top_logits_to_the_exact_int8_values() -> None:
    """``refine_top``: the leading outputs equal fp32 x times the int8 rows, not bf16-rounded."""
    gen = torch.Generator().manual_seed(3)
    linear = nn.Linear(64, 512, bias=False)
    linear.weight.data = torch.randn(512, 64, generator=gen)
    x = torch.randn(6, 64, generator=gen) * 4  # logits of a few tens: bf16 steps of 0.125+
    layer = Int8Linear(linear, dense_min_rows=None, refine_top=8)
    plain = Int8Linear(linear, dense_min_rows=None)
    exact = x.double() @ (layer.qweight.double() * layer.scale_bf16.double()[:, None]).t()
    got, rounded = layer(x), plain(x)
    top = exact.topk(4, dim=-1).indices
    torch.testing.assert_close(
        got.gather(1, top).double(), exact.gather(1, top), rtol=1e-6, atol=1e-4
    )
    assert torch.equal(got.argmax(-1), exact.argmax(-1))
    # the kernel's own values are coarser: what the refinement is for
    assert float((rounded.double() - exact).gather(1, top).abs().max()) > 1e-3
    others = torch.ones_like(got, dtype=torch.bool).scatter_(1, got.topk(8).indices, False)
    assert torch.equal(got[others], rounded[others])  # the rest keep the kernel's values


@pytest.mark.parametrize("rows", [1, REFINE_ROWS + 1, 16])
def test_refined_logits_are_the_bits_of_one_product_over_every_row(rows: int) -> None:
    """The head refines ``REFINE_ROWS`` rows at a time: the same bits as one product over the
    step's rows (its int8 rows picked, as fp32, times the activations, then scaled)."""
    gen = torch.Generator().manual_seed(rows)
    linear = nn.Linear(96, 640, bias=False)
    linear.weight.data = torch.randn(640, 96, generator=gen)
    x = torch.randn(rows, 96, generator=gen) * 4
    layer = Int8Linear(linear, dense_min_rows=None, refine_top=32)
    got = layer(x)
    ranked = Int8Linear(linear, dense_min_rows=None)(x)
    top = ranked.topk(32, dim=-1).indices
    whole = torch.einsum("ri,rki->rk", x, layer.qweight[top].float())
    whole.mul_(layer.scale_bf16[top].float())
    assert torch.equal(got.gather(1, top), whole)


def test_a_heads_ranker_ranks_and_the_top_logits_are_still_the_exact_int8_ones() -> None:
    """``ranker``: its values rank the outputs and stand for the others; the leading outputs are
    recomputed from the int8 rows as without it, and bf16 inputs never reach it."""
    gen = torch.Generator().manual_seed(4)
    linear = nn.Linear(64, 512, bias=True)
    linear.weight.data = torch.randn(512, 64, generator=gen)
    x = torch.randn(6, 64, generator=gen) * 4
    layer = Int8Linear(linear, dense_min_rows=None, refine_top=8)
    int8_head = Int8Linear(linear, dense_min_rows=None, refine_top=8)
    calls: list[tuple[int, ...]] = []

    def rank(rows: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(rows.shape))
        # a coarse ranking (the weights rounded to multiples of 4 codes), not the exact values
        coarse = (q.float() / 4).round() * 4 * scale.float()[:, None]
        return rows @ coarse.t()

    layer.ranker = rank
    w8 = layer.qweight.double() * layer.scale_bf16.double()[:, None]
    exact = x.double() @ w8.t() + linear.bias.detach().double()
    got = layer(x)
    assert calls == [(6, 64)]
    top = exact.topk(4, dim=-1).indices
    torch.testing.assert_close(
        got.gather(1, top).double(), exact.gather(1, top), rtol=1e-6, atol=1e-4
    )
    assert torch.equal(got.argmax(-1), int8_head(x).argmax(-1))
    # outside the refined ones: the ranker's values (plus the bias), which differ from int8's
    ranked = rank(x, layer.qweight, layer.scale_bf16) + linear.bias.detach()
    others = torch.ones_like(got, dtype=torch.bool).scatter_(1, ranked.topk(8).indices, False)
    assert torch.equal(got[others], ranked[others])
    assert not torch.equal(got[others], int8_head(x)[others])
    # bf16 activations are not refined, so they take the int8 kernel, never the ranker
    assert torch.equal(layer(x.bfloat16()), int8_head(x.bfloat16()))
    assert len(calls) == 2


def test_int4_refuses_a_ragged_layer_and_unknown_names() -> None:
    with pytest.raises(ConfigError, match="multiples of 32"):
        Int4Linear(nn.Linear(40, 16))
    with pytest.raises(ConfigError, match="multiples of 16; this model has a 72x64 layer"):
        Int4Linear(nn.Linear(64, 72))
    with pytest.raises(ConfigError, match="weight_dtype must be one of"):
        quantize_linears(nn.Sequential(nn.Linear(32, 32)), "int2")
    with pytest.raises(ConfigError, match="weight_dtype"):
        EngineConfig(weight_dtype="float8")
    with pytest.raises(ConfigError, match="CPU weight-only kernels"):
        EngineConfig(weight_dtype="int4", device="cuda")


def top1_agreement(
    llm: LLM, ids: list[int], weight_dtype: str, dense_min_rows: int | None = DENSE_MIN_ROWS
) -> float:
    """Share of positions where the ``weight_dtype`` copy of ``llm``'s model picks fp32's top-1.

    One prefill of every id: with the default cut-over the decoder layers use their dense copy;
    ``dense_min_rows=None`` runs the kernels (the path of decode steps and short chunks).
    """
    runner = llm.engine.runner
    reference = prefill_logits(runner.model, runner.model_config, ids).argmax(-1)
    quantised = copy.deepcopy(runner.model)
    quantize_linears(quantised, weight_dtype, dense_min_rows)
    picks = prefill_logits(quantised, runner.model_config, ids).argmax(-1)
    return float((picks == reference).float().mean())


def _ids(llm: LLM, text: str, n: int) -> list[int]:
    ids = llm.tokenizer.encode(text)
    while len(ids) < n:
        ids += ids
    return ids[:n]


@pytest.mark.parametrize("dense_min_rows", [DENSE_MIN_ROWS, None], ids=["dense", "kernel"])
@pytest.mark.parametrize("weight_dtype", ["int8", "int4"])
def test_tinystories_top1_agreement(
    tinystories_dir: Path, prompts: list[str], weight_dtype: str, dense_min_rows: int | None
) -> None:
    llm = LLM(tinystories_dir, dtype="float32", num_blocks=8)
    ids = _ids(llm, " ".join(prompts), 384)
    agreement = top1_agreement(llm, ids, weight_dtype, dense_min_rows)
    assert agreement >= TINYSTORIES_MIN_AGREEMENT[weight_dtype]


@pytest.mark.parametrize("dense_min_rows", [DENSE_MIN_ROWS, None], ids=["dense", "kernel"])
@pytest.mark.parametrize("weight_dtype", ["int8", "int4"])
def test_smollm2_top1_agreement(
    smollm2_llm: LLM, weight_dtype: str, dense_min_rows: int | None
) -> None:
    text = Path(__file__).resolve().parents[2].joinpath("docs", "engine.md").read_text()
    ids = _ids(smollm2_llm, text, 512)
    agreement = top1_agreement(smollm2_llm, ids, weight_dtype, dense_min_rows)
    assert agreement >= SMOLLM2_MIN_AGREEMENT[weight_dtype]


def test_smollm2_int4_head_gives_the_int8_heads_top_20(smollm2_llm: LLM) -> None:
    """torch's int8 ranking pass (bf16 outputs) + ``HEAD_REFINE_TOP`` refined logits: the 20
    largest logits of a row (``top_logprobs`` reaches 20) are the exact int8 head's, and so is
    the argmax. (The fused kernel's ranking pass: test_cpu_decode.py.)"""
    runner = smollm2_llm.engine.runner
    quantised = copy.deepcopy(runner.model)
    quantize_linears(quantised, "int4")
    head = quantised.lm_head
    assert isinstance(head, Int8Linear) and head.ranker is None
    assert head.refine_top == HEAD_REFINE_TOP
    inputs: list[torch.Tensor] = []
    hook = head.register_forward_hook(lambda _m, args, _out: inputs.append(args[0]))
    text = Path(__file__).resolve().parents[2].joinpath("docs", "engine.md").read_text()
    got = prefill_logits(quantised, runner.model_config, _ids(smollm2_llm, text, 512))
    hook.remove()
    exact = inputs[0] @ (head.qweight.float() * head.scale_bf16.float()[:, None]).t()
    assert torch.equal(got.argmax(-1), exact.argmax(-1))
    same = (got.topk(20).indices.sort().values == exact.topk(20).indices.sort().values).all(-1)
    assert float(same.float().mean()) >= 0.98


def test_weight_dtype_reaches_the_model(tinystories_dir: Path) -> None:
    """``LLM(weight_dtype="int4")`` runs int4 decoder layers and an int8 head, and generates."""
    from promptcache.engine import SamplingParams

    llm = LLM(tinystories_dir, dtype="float32", num_blocks=16, weight_dtype="int4")
    model = llm.engine.runner.model
    assert isinstance(model.layers[0].mlp.gate_up_proj, Int4Linear)
    assert isinstance(model.lm_head, Int8Linear)
    if llm.engine.runner.fused_decode is not None:  # ranks from its int8 rows in the kernel
        assert model.lm_head.ranker is not None
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    [out] = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=8))
    assert len(out.output_token_ids) == 8


@pytest.mark.parametrize("weight_dtype", ["int8", "int4"])
def test_a_bf16_model_with_weight_only_layers_generates_a_small_batch(
    tinystories_dir: Path, weight_dtype: str
) -> None:
    """``dtype="bfloat16"`` + int4 / int8 with 3 prompts (2-15 rows reach the kernels)."""
    from promptcache.engine import SamplingParams

    llm = LLM(tinystories_dir, dtype="bfloat16", num_blocks=32, weight_dtype=weight_dtype)
    prompts = ["Once upon a time", "The dog ran", "Lily had a red ball"]
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))
    assert [len(o.output_token_ids) for o in outs] == [6, 6, 6]


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict without RoPE tables, prepacked dense copies as plain matrices."""
    return {
        k: v.to_dense() if v.is_mkldnn else v
        for k, v in model.state_dict().items()
        if "_table" not in k
    }


@pytest.mark.parametrize(
    ("arch", "weight_dtype", "overrides"),
    [
        ("llama", "int4", {}),
        ("qwen2", "int8", {"tie_word_embeddings": True}),  # q/k/v biases, tied head
    ],
)
def test_layer_by_layer_quantisation_equals_quantising_after_loading(
    tmp_path: Path, arch: str, weight_dtype: str, overrides: dict[str, object]
) -> None:
    """``load_model(weight_dtype=...)`` quantises each layer while loading: same tensors as
    loading in fp32 and quantising the whole model afterwards, over a sharded checkpoint."""
    from engine_support import build_tiny_checkpoint

    from promptcache.engine.attention import get_backend
    from promptcache.engine.loader import load_model

    model_dir = build_tiny_checkpoint(
        tmp_path / arch, arch, save_kwargs={"max_shard_size": "100KB"}, **overrides
    )
    backend = get_backend("torch")
    streamed, _ = load_model(model_dir, backend, "float32", weight_dtype=weight_dtype)
    reference, _ = load_model(model_dir, backend, "float32")
    quantize_linears(reference, weight_dtype)
    got, want = _state(streamed), _state(reference)
    assert got.keys() == want.keys() and any(k.endswith("dense") for k in got)
    for key, value in want.items():
        assert torch.equal(got[key], value), key
    assert isinstance(streamed.embed_tokens, Int8Embedding)
    if overrides.get("tie_word_embeddings"):  # one int8 matrix serves lookup and head
        assert streamed.embed_tokens.qweight is streamed.lm_head.qweight


def test_int8_embedding_looks_up_the_dequantised_rows() -> None:
    gen = torch.Generator().manual_seed(4)
    table = torch.randn(300, 48, generator=gen)
    q, scale = quantize_int8_rows(table)
    embedding = Int8Embedding(q, scale, torch.float32)
    ids = torch.tensor([[5, 0, 299], [7, 7, 1]])
    expected = q[ids].float() * scale[ids].float()[..., None]
    assert torch.equal(embedding(ids), expected)
    assert float((embedding(ids) - table[ids]).abs().max()) <= float(scale.float().max()) / 2 + 1e-6
