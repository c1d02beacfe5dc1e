"""Rotary position embeddings (RoPE) as transformers computes them, for every supported rope_type.

The cos/sin tables are precomputed in fp32 for positions ``0 .. max_positions - 1``, with the same
operations transformers uses (``inv_freq`` from the base, ``positions * inv_freq``, ``cat(freqs,
freqs)``, ``cos``/``sin``), so a position's rotation is bit-identical to Hugging Face's.

rope_type:
- ``default``: ``inv_freq = 1 / theta ** (arange(0, d, 2) / d)``.
- ``linear``: ``inv_freq / factor`` (position interpolation).
- ``llama3``: Llama 3.1's wavelength-dependent interpolation (``factor``, ``low_freq_factor``,
  ``high_freq_factor``, ``original_max_position_embeddings``).
- ``dynamic`` (NTK): positions below ``max_position_embeddings`` use plain RoPE; a token at
  position ``p >= max_position_embeddings`` is rotated with the base transformers computes for
  ``seq_len = p + 1``. This is what transformers' ``generate`` does token by token (each decode
  step recomputes for its own length), so output matches HF whenever the *prompt* fits in
  ``max_position_embeddings``. HF also re-rotates a whole longer prompt with the prompt's final
  length; a paged cache cannot (prefix-cached keys must not depend on what follows them), so
  prompts longer than ``max_position_embeddings`` differ from HF under dynamic scaling.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["RotaryEmbedding", "apply_rotary", "rope_inv_freq"]


def rope_inv_freq(head_dim: int, theta: float, scaling: dict[str, Any] | None) -> torch.Tensor:
    """Inverse frequencies ``[head_dim // 2]`` fp32 for the static rope types (not ``dynamic``)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
    if scaling is None or scaling["rope_type"] == "dynamic":
        return inv_freq
    rope_type = scaling["rope_type"]
    factor = float(scaling["factor"])
    if rope_type == "linear":
        return inv_freq / factor
    if rope_type == "llama3":
        low = float(scaling["low_freq_factor"])
        high = float(scaling["high_freq_factor"])
        old_len = float(scaling["original_max_position_embeddings"])
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled)
    raise ValueError(f"unsupported rope_type {rope_type!r}")  # ModelConfig rejects these earlier


def _freqs_dynamic(
    head_dim: int, theta: float, factor: float, max_trained: int, max_positions: int
) -> torch.Tensor:
    """``[max_positions, head_dim // 2]`` angles with per-position dynamic-NTK bases."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float) / head_dim
    base_inv = 1.0 / (theta**exponents)
    positions = torch.arange(max_positions, dtype=torch.float)
    rows = positions[:, None] * base_inv[None, :]
    for p in range(max_trained, max_positions):
        seq_len = p + 1
        base = theta * ((factor * seq_len / max_trained) - (factor - 1)) ** (
            head_dim / (head_dim - 2)
        )
        inv = 1.0 / (base**exponents)
        rows[p] = positions[p] * inv
    return rows


class RotaryEmbedding(torch.nn.Module):
    """Precomputed cos/sin tables; ``forward(positions)`` returns the rows ``apply_rotary`` takes.

    ``cos_table`` / ``sin_table``: fp32 ``[max_positions, head_dim]``, or ``[max_positions,
    head_dim / 2]`` where ``halved`` (each row's second half is its first, bit for bit).

    Args:
        head_dim: rotary dimension (the full head).
        theta: RoPE base.
        scaling: ``ModelConfig.rope_scaling`` (None = plain RoPE).
        max_trained: ``max_position_embeddings`` of the checkpoint.
        max_positions: table length in tokens (the engine's max_model_len).
    """

    cos_table: torch.Tensor
    sin_table: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        theta: float,
        scaling: dict[str, Any] | None,
        max_trained: int,
        max_positions: int,
    ) -> None:
        super().__init__()
        self.head_dim, self.theta, self.scaling = head_dim, theta, scaling
        self.max_trained, self.max_positions = max_trained, max_positions
        self.init_tables()

    def init_tables(self) -> None:
        """(Re)compute the fp32 tables, e.g. after the model was built on the meta device."""
        if self.scaling is not None and self.scaling["rope_type"] == "dynamic":
            freqs = _freqs_dynamic(
                self.head_dim,
                self.theta,
                float(self.scaling["factor"]),
                self.max_trained,
                self.max_positions,
            )
        else:
            inv_freq = rope_inv_freq(self.head_dim, self.theta, self.scaling)
            positions = torch.arange(self.max_positions, dtype=torch.float)
            freqs = positions[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        half = self.head_dim // 2
        # A row's two halves come from the same angles. Where they are the same bits, which a
        # vectorised cos/sin need not promise, the tables keep one half ([positions, head_dim
        # / 2]; SmolLM2 at 8,192 positions: 2 MiB instead of 4) and ``forward`` repeats it.
        self.halved = torch.equal(cos[:, :half], cos[:, half:]) and torch.equal(
            sin[:, :half], sin[:, half:]
        )
        if self.halved:
            cos, sin = cos[:, :half].clone(), sin[:, :half].clone()
        self.register_buffer("cos_table", cos, persistent=False)
        self.register_buffer("sin_table", sin, persistent=False)

    def forward(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``positions [num_tokens]`` int64 -> ``(cos, signed_sin)``, each ``[num_tokens, 1,
        head_dim]`` (broadcast over heads), the pair ``apply_rotary`` takes.

        ``signed_sin`` is ``sin`` with its first half negated: transformers' ``rotate_half(x)
        * sin`` equals ``roll(x, head_dim / 2) * signed_sin`` bit for bit (a sign flip is exact).
        """
        cos, sin = self.cos_table[positions], self.sin_table[positions]
        half = self.head_dim // 2
        if self.halved:
            cos = torch.cat((cos, cos), -1)
            signed_sin = torch.cat((-sin, sin), -1)
        else:
            signed_sin = torch.cat((-sin[:, :half], sin[:, half:]), -1)
        return cos.to(dtype).unsqueeze(1), signed_sin.to(dtype).unsqueeze(1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x [num_tokens, heads, head_dim]`` by ``RotaryEmbedding.forward``'s pair.

    Computes transformers' ``x * cos + rotate_half(x) * sin`` with the same roundings in the
    same order, as ``x * cos + roll(x, head_dim / 2) * signed_sin`` (4 ops instead of 8).
    """
    rotated = x.roll(x.shape[-1] // 2, dims=-1).mul_(signed_sin)
    return (x * cos).add_(rotated)
