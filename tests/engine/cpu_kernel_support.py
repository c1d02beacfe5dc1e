"""float64 references for the fused CPU kernels (engine/cpu_decode), written with torch ops.

Each decodes the kernel's inputs independently of the C code: the int4 grids from a layer's
dense copy (or, once ``FusedDecode.build`` has freed it, from the kernel's own copy, whose
fidelity to the grid ``test_cpu_decode.py`` checks first), softmax attention over a block
table, and one Llama layer stack for one token.
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path
from typing import Any

import torch
from engine_support import prefill_logits

from promptcache.engine import LLM
from promptcache.engine.cpu_decode import FusedDecode
from promptcache.engine.models.quant_linear import Int4Linear

ENGINE_DOC = Path(__file__).resolve().parents[2] / "docs" / "engine.md"


def grid_f64(layer: Int4Linear) -> torch.Tensor:
    """float64 ``[out, in]``: the layer's grid ``(q - 8) * scale + zero``, ``q`` read back from
    its dense copy (independent of the C packer)."""
    assert layer.dense is not None
    dense = layer.dense.to_dense() if layer.dense.is_mkldnn else layer.dense
    out_f, in_f = dense.shape
    sz = layer.packed_scales().double()  # [in / 32, out, 2]
    scale, zero = (sz[..., i].t()[..., None] for i in (0, 1))  # [out, in / 32, 1]
    q = torch.round((dense.double().view(out_f, in_f // 32, 32) - zero) / scale) + 8
    return ((q.clamp(0, 15) - 8) * scale + zero).view(out_f, in_f)


def _d_m(scale: torch.Tensor, zero: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's float64 ``d = scale`` and ``m = zero - 8 * scale`` (rounded to fp32, as the
    kernel computes it) from bf16 scales and zeros."""
    d = scale.float()
    return d.double(), (zero.float() - 8 * d).double()


def unpack_q4(qs: torch.Tensor, dm: torch.Tensor) -> torch.Tensor:
    """float64 ``[out, in]`` from the kernel's row layout (``pack_int4``: bf16 scale, zero)."""
    out_f, half = qs.shape
    groups = qs.view(out_f, half // 16, 16)
    q = torch.stack([groups & 15, groups >> 4], dim=-2).view(out_f, half // 16, 32).double()
    d, m = _d_m(dm[..., :1], dm[..., 1:])
    return (q * d + m).view(out_f, 2 * half)


def unpack_panels(pq: torch.Tensor, pdm: torch.Tensor) -> torch.Tensor:
    """float64 ``[out, in]`` from the kernel's panel layout (``pack_panels``)."""
    panels, steps, _ = pq.shape
    in_f = 2 * steps
    nib = pq.reshape(panels, steps, 8, 2)  # [panels, step, row t, input 2 s + i]
    q = torch.cat([nib & 15, nib >> 4], dim=2)  # [panels, step, 16 rows, 2]: rows 0-7, 8-15
    q = q.permute(0, 2, 1, 3).reshape(panels, 16, in_f).double()  # [panels, 16, in]
    d, m = _d_m(pdm[:, :, 0], pdm[:, :, 1])  # [panels, in / 32, 16]
    d = d.repeat_interleave(32, dim=1).transpose(1, 2)  # [panels, 16, in]
    m = m.repeat_interleave(32, dim=1).transpose(1, 2)
    return (q * d + m).reshape(panels * 16, in_f)


def layer_grid(layer: Int4Linear) -> torch.Tensor:
    """The layer's grid in float64: from its dense copy, or from the kernel's copy once freed."""
    if layer.dense is not None:
        return grid_f64(layer)
    pq, pdm = layer._cpu_decode_weights  # type: ignore[attr-defined]
    return unpack_panels(pq, pdm)


def attention_f64(
    q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, table: list[int], ctx: int
) -> torch.Tensor:
    """float64 softmax attention of ``q [heads, hd]`` over the first ``ctx`` table keys."""
    heads, hd = q.shape
    kv_heads = k_pool.shape[2]
    rows = torch.tensor(table).repeat_interleave(k_pool.shape[1]) * k_pool.shape[1]
    rows = (rows + torch.arange(len(rows)) % k_pool.shape[1])[:ctx]
    k = k_pool.reshape(-1, kv_heads, hd)[rows].double()  # [ctx, kv_heads, hd]
    v = v_pool.reshape(-1, kv_heads, hd)[rows].double()
    group = heads // kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = torch.einsum("hd,chd->hc", q.double(), k) / math.sqrt(hd)
    return torch.einsum("hc,chd->hd", scores.softmax(-1), v)


def rms_f64(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight.double() * (x / torch.sqrt(x.pow(2).mean() + eps))


def rope_f64(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' ``x * cos + rotate_half(x) * sin`` for ``x [heads, hd]``."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[:, half:], x[:, :half]], dim=-1)
    return x * cos + rotated * sin


#: ``assert_close`` tolerance of a pass (of any number of rows) against ``token_step_f64``'s
#: exact products: the kernel rounds each product's inputs to int16, by up to 2^-16 of their
#: group's largest (about 1e-4 at the tinystories down projection's large inputs), and the next
#: layer carries that on.
INT16_PASS = {"atol": 5e-4, "rtol": 5e-4}

#: ``assert_close`` tolerance of a pass into an fp16 pool, its K/V and hidden states, against
#: the exact ones: fp16 rounds to 11 significant bits (half a step: 2^-12 relative, 2.4e-4), on
#: top of a pass's own error; and a K/V value that lies within that error of a rounding boundary
#: can round to the other neighbour than the reference's (a whole step, 2^-11), which attention
#: carries into the hidden states.
F16_KV = {"atol": 1e-3, "rtol": 1e-3}


def as_stored(t: torch.Tensor, kv_dtype: torch.dtype) -> torch.Tensor:
    """float64 ``t`` as a KV pool of ``kv_dtype`` gives it back: rounded to fp16 for
    ``torch.float16``; exact for ``torch.float32`` (the reference keeps its float64 values)."""
    return t if kv_dtype == torch.float32 else t.to(kv_dtype).double()


def token_step_f64(
    model: torch.nn.Module,
    token: int,
    position: int,
    pools: list[tuple[torch.Tensor, torch.Tensor]],
    table: list[int],
    kv_dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """One token at ``position`` of a sequence through every layer in float64, from the layers'
    int4 grids, attending to the ``position`` keys before it in ``pools`` ([blocks, block_size,
    kv_heads, hd] per layer, by ``table``) and its own: (final hidden [hidden], its K/V per
    layer, exact). Its own K/V are attended to as a pool of ``kv_dtype`` holds them: rounded to
    fp16 for ``torch.float16`` (as the kernel stores them), exact for ``torch.float32``.
    ``pools`` is not modified."""
    cfg = model.config
    heads, kv_heads, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    block_size = pools[0][0].shape[1]
    x = model.embed_tokens(torch.tensor([token])).double().view(-1)
    inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    angles = torch.cat([position * inv_freq] * 2)
    cos, sin = angles.cos(), angles.sin()
    new_kv = []
    slot_block, slot_off = table[position // block_size], position % block_size
    for layer, (k_pool, v_pool) in zip(model.layers, pools, strict=True):
        attn, mlp = layer.self_attn, layer.mlp
        h = rms_f64(x, layer.input_layernorm.weight, cfg.rms_norm_eps)
        qkv = layer_grid(attn.qkv_proj) @ h
        q = rope_f64(qkv[: heads * hd].view(heads, hd), cos, sin)
        k = rope_f64(qkv[heads * hd : (heads + kv_heads) * hd].view(kv_heads, hd), cos, sin)
        v = qkv[(heads + kv_heads) * hd :].view(kv_heads, hd)
        k_pool, v_pool = k_pool.double().clone(), v_pool.double().clone()
        k_pool[slot_block, slot_off] = as_stored(k, kv_dtype)
        v_pool[slot_block, slot_off] = as_stored(v, kv_dtype)
        new_kv.append((k, v))
        o = attention_f64(q, k_pool, v_pool, table, position + 1).reshape(-1)
        x = x + layer_grid(attn.o_proj) @ o
        h = rms_f64(x, layer.post_attention_layernorm.weight, cfg.rms_norm_eps)
        gate, up = (layer_grid(mlp.gate_up_proj) @ h).chunk(2)
        x = x + layer_grid(mlp.down_proj) @ (torch.nn.functional.silu(gate) * up)
    return rms_f64(x, model.norm.weight, cfg.rms_norm_eps), new_kv


def engine_doc_reference(llm32: Any, count: int = 512) -> tuple[list[int], torch.Tensor]:
    """The first ``count`` token ids of docs/engine.md and the fp32 model ``llm32``'s argmax at
    each position (one prefill): the reference of the top-1 agreement tests."""
    ids: list[int] = llm32.tokenizer.encode(ENGINE_DOC.read_text())[:count]
    runner = llm32.engine.runner
    return ids, prefill_logits(runner.model, runner.model_config, ids).argmax(-1)


def smollm2_fused(gguf: Path, num_blocks: int = 33) -> tuple[LLM, FusedDecode]:
    """SmolLM2 with int4 layers and the fused kernel required, on a pool of ``num_blocks``."""
    llm = LLM(
        gguf, dtype="float32", weight_dtype="int4", num_blocks=num_blocks, fused_cpu_decode=True
    )
    fused = llm.engine.runner.fused_decode
    assert isinstance(fused, FusedDecode)
    return llm, fused


def paged_attention(
    lib: ctypes.CDLL,
    dims: ctypes.Structure,
    plan: Any,
    q: torch.Tensor,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    tables: list[list[int]],
) -> torch.Tensor:
    """The library's attention alone (``pc_paged_attention``) by ``plan``: ``q [rows, heads, hd]``
    over the pools through ``tables`` (padded with -1 here) -> ``[rows, heads, hd]``, NaN-filled
    first so a row the kernel skips shows."""
    out = torch.full(q.shape, float("nan"))
    work = torch.empty(plan.scratch_floats)
    width = max(len(t) for t in tables)
    tables_t = torch.tensor([t + [-1] * (width - len(t)) for t in tables], dtype=torch.int32)
    lib.pc_paged_attention(
        ctypes.byref(dims),
        q.shape[0],
        q.data_ptr(),
        k_pool.data_ptr(),
        v_pool.data_ptr(),
        tables_t.data_ptr(),
        width,
        ctypes.byref(plan.struct),
        out.data_ptr(),
        work.data_ptr(),
    )
    return out
