# mypy: disable-error-code="no-untyped-def, untyped-decorator"
# (@triton.jit functions take Triton tensors and constexprs, which have no useful static types.)
# Triton compiles `if` on constexprs statically; keep the `X == tl.dtype` order and if/else blocks.
# ruff: noqa: SIM108, SIM300
"""Small ``@triton.jit`` helpers shared by the kernels: rounding, quantisation and the dot product.

Why these exist. The kernels must give the same numbers on a GPU and under the Triton interpreter
(``TRITON_INTERPRET=1``), which is how CI checks them on a CPU. Triton 3.9's interpreter stores
bfloat16 as raw uint16, so it cannot multiply bfloat16 tiles, and it converts float32 to bfloat16
and to float8 by truncating the mantissa (with a carry bug for float8). So:

- every tile is widened to float32 right after its load, and the dot operands are *rounded* to the
  dot dtype but, under the interpreter (``EMULATE=True``), kept in float32. The products of two
  bf16/fp16 values are exact in float32, so this yields the GPU's tensor-core result;
- rounding to bfloat16 and to float8 e4m3 is done with integer and float32 operations whose
  result is the same on both (round half to even, as the GPU's ``cvt.rn``).

All helpers take and return float32 tiles unless stated otherwise.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def round_half_even(x):
    """Round float32 values to the nearest integer, ties to even (``torch.round``). Exact."""
    f = tl.floor(x)
    frac = x - f
    f_is_odd = (f - 2.0 * tl.floor(f * 0.5)) != 0.0
    return tl.where((frac > 0.5) | ((frac == 0.5) & f_is_odd), f + 1.0, f)


@triton.jit
def round_to_bf16(x):
    """Round float32 to the nearest bfloat16 value (ties to even), returned as float32.

    Adds 0x7FFF plus the lowest kept bit, then clears the 16 dropped bits (NaN is not handled:
    attention never produces one from finite inputs).
    """
    bits = x.to(tl.int32, bitcast=True)
    bits = bits + (0x7FFF + ((bits >> 16) & 1))
    return (bits & -65536).to(tl.float32, bitcast=True)


@triton.jit
def round_to_fp8_e4m3(x):
    """Round float32 to the nearest float8 e4m3fn value, ties to even, saturating at +-448.

    The spacing of e4m3 values around ``x`` is 2**(e - 3) for ``x`` in [2**e, 2**(e + 1)) with
    e >= -6, and 2**-9 below (subnormals), so rounding ``x / spacing`` to an integer and scaling
    back is exact. Rounding the magnitude and restoring the sign bit afterwards keeps -0.0 for
    negative values that round to zero, as ``torch``'s conversion does. The result is float32
    holding a value that e4m3fn represents exactly, so the cast that follows is lossless on every
    backend.
    """
    bits = x.to(tl.int32, bitcast=True)
    magnitude = tl.minimum(tl.abs(x), 448.0)
    biased_exp = tl.maximum((magnitude.to(tl.int32, bitcast=True) >> 23) & 0xFF, 127 - 6)
    spacing = ((biased_exp - 3) << 23).to(tl.float32, bitcast=True)
    inv_spacing = ((254 - (biased_exp - 3)) << 23).to(tl.float32, bitcast=True)
    rounded = round_half_even(magnitude * inv_spacing) * spacing
    return tl.where(bits < 0, -rounded, rounded)  # keeps the sign of zero, as torch does


@triton.jit
def quantize(x, scale, CACHE_DTYPE: tl.constexpr):
    """Quantise float32 ``x`` for a cache of ``CACHE_DTYPE`` (int8 or float8e4nv) and cast to it.

    ``code = round(x / scale)`` with IEEE division, clamped to +-127 for int8 and to +-448 for
    e4m3; ``scale`` is a float32 tile broadcastable to ``x``. Returns a tile of ``CACHE_DTYPE``.
    """
    y = tl.div_rn(x, scale)
    if CACHE_DTYPE == tl.int8:
        code = round_half_even(tl.minimum(tl.maximum(y, -127.0), 127.0)).to(tl.int8)
    else:
        code = round_to_fp8_e4m3(y).to(CACHE_DTYPE)
    return code


@triton.jit
def as_dot_operand(x, DOT_DTYPE: tl.constexpr, EMULATE: tl.constexpr):
    """Round a float32 tile to ``DOT_DTYPE`` for ``tl.dot``; under the interpreter keep float32."""
    if EMULATE:
        if DOT_DTYPE == tl.bfloat16:
            y = round_to_bf16(x)
        elif DOT_DTYPE == tl.float16:
            y = x.to(tl.float16).to(tl.float32)
        else:
            y = x
    else:
        y = x.to(DOT_DTYPE)
    return y


@triton.jit
def cast_for_store(x, OUT_DTYPE: tl.constexpr, EMULATE: tl.constexpr):
    """Cast a float32 tile to ``OUT_DTYPE`` with round-half-even on every backend."""
    if EMULATE and OUT_DTYPE == tl.bfloat16:
        y = round_to_bf16(x).to(OUT_DTYPE)
    else:
        y = x.to(OUT_DTYPE)
    return y


@triton.jit
def dot(a, b, IEEE: tl.constexpr):
    """``a @ b`` with a float32 accumulator; ``IEEE`` forces exact float32 (no TF32) products."""
    if IEEE:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b)
    return c


@triton.jit
def load_paged_tile(
    cache_ptr,
    block_table_ptr,
    toks,
    tok_mask,
    kv_head,
    d,
    d_mask,
    stride_block,
    stride_tok,
    stride_head,
    BLOCK_SIZE: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """Gather the rows of cache tokens ``toks`` of one kv head as a [len(toks), BLOCK_D] tile.

    Token ``t`` of a sequence lives in block ``block_table[t // BLOCK_SIZE]`` at offset
    ``t % BLOCK_SIZE``; the block id is looked up per token, so a tile may span several blocks
    and any block size works. Masked tokens and dims read as 0 (their block id is not read).
    The tile keeps the cache's dtype on a GPU, so `as_dot_operand` converts it once; under the
    interpreter (``EMULATE``) it is widened to float32, as every helper here expects there.
    """
    block_ids = tl.load(block_table_ptr + toks // BLOCK_SIZE, mask=tok_mask, other=0)
    rows = block_ids.to(tl.int64) * stride_block + (toks % BLOCK_SIZE) * stride_tok
    ptrs = cache_ptr + (rows + kv_head * stride_head)[:, None] + d[None, :]
    return widen_if_emulated(
        tl.load(ptrs, mask=tok_mask[:, None] & d_mask[None, :], other=0.0), EMULATE
    )


@triton.jit
def widen_if_emulated(x, EMULATE: tl.constexpr):
    """``x`` as float32 under the interpreter; on a GPU ``x`` unchanged.

    On a GPU a tile goes straight from its stored dtype to the dot dtype (bf16 to bf16 is no
    conversion; int8 and e4m3 codes convert exactly), which gives the same operands as widening
    first, with one conversion per element instead of two.
    """
    if EMULATE:
        y = x.to(tl.float32)
    else:
        y = x
    return y


@triton.jit
def softmax_step(
    s,
    v,
    m_i,
    l_i,
    acc,
    v_mult,
    DOT_DTYPE: tl.constexpr,
    IEEE: tl.constexpr,
    EMULATE: tl.constexpr,
):
    """One online-softmax step over a key tile; returns the updated ``(m_i, l_i, acc)``.

    ``s`` [M, N] are base-2 scores (already times softmax scale * log2(e)), -inf where masked. A
    row that has seen no finite score yet (a sliding window that starts past this tile) keeps
    ``m_i = -inf``, ``l_i = 0`` and ``acc = 0``: its exponents are taken against 0 instead of
    -inf, so no NaN arises. ``v`` [N, D] is the value
    tile rounded for the dot; ``v_mult`` scales its contribution (the kv head's dequant scale).
    ``m_i`` running row max, ``l_i`` running sum of exp2(s - m_i), ``acc`` unnormalised output.
    """
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_ref)
    p = tl.exp2(s - m_ref[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    pv = dot(as_dot_operand(p, DOT_DTYPE, EMULATE), v, IEEE)
    acc = acc * alpha[:, None] + pv * v_mult
    return m_new, l_i, acc
