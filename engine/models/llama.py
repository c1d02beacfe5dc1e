"""Llama, Qwen2 and Mistral decoder forward pass over a paged KV cache.

The three architectures share one module tree; they differ only in settings ``ModelConfig``
reads from config.json: Qwen2 adds a bias to the q/k/v projections, Mistral (and Qwen2 when asked)
uses a sliding attention window, Llama 3 uses its own RoPE scaling. Numerics follow transformers
operation by operation (RMSNorm in fp32 then cast, RoPE with ``rotate_half``, SwiGLU, logits cast
to fp32), so greedy decoding yields the same token ids.

Inputs are packed, not padded: ``input_ids`` and ``positions`` are ``[num_tokens]`` covering the
new tokens of every sequence in the batch, and attention reads everything else from the KV pool
through ``AttnMetadata``.

Weights: q/k/v are stored as one fused ``qkv_proj`` and gate/up as one ``gate_up_proj`` (one GEMM
each); ``load_weights`` maps Hugging Face tensor names onto them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from promptcache.errors import ModelLoadError

from ..attention.base import AttentionBackend, AttnMetadata, KVCacheLayer
from ..model_config import ModelConfig
from .rope import RotaryEmbedding, apply_rotary

__all__ = ["LlamaForCausalLM", "RMSNorm"]


class RMSNorm(nn.Module):
    """``weight * x / sqrt(mean(x^2) + eps)``, computed in fp32 and cast back like transformers."""

    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [num_tokens, hidden]`` -> same shape and dtype."""
        dtype = x.dtype
        if dtype == torch.float32 and self.weight.dtype == torch.float32 and x.is_cpu:
            # torch's CPU op gives transformers' fp32 result bit for bit (240 of 240 cases, hidden
            # 64-4,096; tests/engine/test_rms_norm.py) in one aten call instead of eight: 61
            # norms a SmolLM2 decode step. On GPUs its fused kernel may round otherwise.
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        h = x.to(torch.float32)
        # transformers' h * rsqrt(mean(h^2) + eps), the small temporaries updated in place
        h = h * h.pow(2).mean(-1, keepdim=True).add_(self.eps).rsqrt_()
        return self.weight * h.to(dtype)


class Attention(nn.Module):
    """Multi-head attention with GQA/MQA, RoPE and a paged KV cache."""

    def __init__(
        self,
        config: ModelConfig,
        layer_id: int,
        backend: AttentionBackend,
    ) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale = self.head_dim**-0.5
        self.sliding_window = config.sliding_windows[layer_id]
        self.qkv_proj = nn.Linear(
            config.hidden_size, self.q_size + 2 * self.kv_size, bias=config.qkv_bias
        )
        self.o_proj = nn.Linear(self.q_size, config.hidden_size, bias=config.o_bias)
        self.backend = backend

    def forward(
        self,
        rope: tuple[torch.Tensor, torch.Tensor],
        hidden: torch.Tensor,
        kv: KVCacheLayer,
        meta: AttnMetadata,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``hidden [num_tokens, hidden]`` -> ``[num_tokens, hidden]``; writes the KV pool.

        ``rope`` is ``RotaryEmbedding.forward``'s ``(cos, signed_sin)`` pair of the tokens'
        positions (looked up once per forward pass and shared by every layer). With ``rows``
        (``[R]`` int64 token indices) the K/V of every token are still stored, but only those
        rows go through ``o_proj`` and the result is ``[R, hidden]``.
        """
        n = hidden.shape[0]
        heads = self.qkv_proj(hidden).view(n, -1, self.head_dim)  # [n, heads + 2 kv_heads, hd]
        cos, sin = rope
        # q and k are adjacent in the fused projection: rotate them as one [n, heads + kv_heads,
        # head_dim] tensor (half the elementwise calls of rotating each).
        qk = apply_rotary(heads[:, : self.num_heads + self.num_kv_heads], cos, sin)
        q, k = qk[:, : self.num_heads], qk[:, self.num_heads :]
        v = heads[:, self.num_heads + self.num_kv_heads :]
        out = self.backend.forward(
            q,
            k,
            v,
            kv.k_cache,
            kv.v_cache,
            meta,
            self.scale,
            kv.k_scale,
            kv.v_scale,
            sliding_window=self.sliding_window,
        )
        out = out.reshape(n, self.q_size)
        if rows is not None:
            out = out.index_select(0, rows)
        result: torch.Tensor = self.o_proj(out)
        return result


class MLP(nn.Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))`` with gate and up fused in one projection."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.intermediate_size = config.intermediate_size
        self.gate_up_proj = nn.Linear(
            config.hidden_size, 2 * config.intermediate_size, bias=config.mlp_bias
        )
        self.down_proj = nn.Linear(
            config.intermediate_size, config.hidden_size, bias=config.mlp_bias
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[num_tokens, hidden]`` -> ``[num_tokens, hidden]``."""
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        # In place on the fresh projection output: one temporary fewer per layer.
        result: torch.Tensor = self.down_proj(F.silu(gate, inplace=True).mul_(up))
        return result


class DecoderLayer(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))`` then ``x + mlp(norm(x))``."""

    def __init__(
        self,
        config: ModelConfig,
        layer_id: int,
        backend: AttentionBackend,
    ) -> None:
        super().__init__()
        self.self_attn = Attention(config, layer_id, backend)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        rope: tuple[torch.Tensor, torch.Tensor],
        hidden: torch.Tensor,
        kv: KVCacheLayer,
        meta: AttnMetadata,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``[num_tokens, hidden]`` -> ``[num_tokens, hidden]``, or ``[R, hidden]`` for ``rows``.

        ``rope``: the tokens' ``(cos, signed_sin)`` rows, see ``Attention.forward``.

        ``rows`` (``[R]`` int64 token indices) keeps only those tokens after attention: every
        token's K/V are written, but the residual, ``o_proj`` and MLP run on ``R`` rows.
        """
        attn = self.self_attn(rope, self.input_layernorm(hidden), kv, meta, rows)
        if rows is not None:
            hidden = hidden.index_select(0, rows)
        hidden = hidden + attn
        result: torch.Tensor = hidden + self.mlp(self.post_attention_layernorm(hidden))
        return result


class LlamaForCausalLM(nn.Module):
    """The decoder stack plus LM head for Llama / Qwen2 / Mistral checkpoints.

    Args:
        config: the checkpoint's ``ModelConfig``.
        backend: attention backend shared by every layer.
        max_positions: RoPE table length in tokens (the engine's max_model_len).
    """

    def __init__(self, config: ModelConfig, backend: AttentionBackend, max_positions: int) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        rotary = RotaryEmbedding(
            config.head_dim,
            config.rope_theta,
            config.rope_scaling,
            config.max_position_embeddings,
            max(max_positions, 1),
        )
        self.rotary = rotary
        self.layers = nn.ModuleList(
            DecoderLayer(config, i, backend) for i in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Share the embedding matrix with the LM head when the config says so.

        Call again after ``to_empty``/device moves, which replace parameters one by one.
        """
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: list[KVCacheLayer],
        meta: AttnMetadata,
        output_rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Run the decoder over the batch's new tokens.

        Args:
            input_ids: ``[num_tokens]`` int64 token ids (all sequences packed).
            positions: ``[num_tokens]`` int64 absolute positions.
            kv_caches: one ``KVCacheLayer`` per layer; new K/V are written into them.
            meta: batch layout for attention.
            output_rows: ``[R]`` int64 token indices whose hidden states are wanted (e.g. the
                last token of each sampling sequence), or None for all. Every token's K/V are
                still written in every layer; only the last layer's ``o_proj`` and MLP and the
                final norm are cut to these rows (a prefill of S tokens that samples once
                saves about 1/num_layers of its linear-layer work).

        Returns:
            Final hidden states ``[num_tokens, hidden_size]`` (``[R, hidden_size]`` with
            ``output_rows``) in the model dtype.
        """
        hidden: torch.Tensor = self.embed_tokens(input_ids)
        rope = self.rotary(positions, hidden.dtype)
        last = len(self.layers) - 1
        for i, (layer, kv) in enumerate(zip(self.layers, kv_caches, strict=True)):
            hidden = layer(rope, hidden, kv, meta, output_rows if i == last else None)
        result: torch.Tensor = self.norm(hidden)
        return result

    def use_column_major_weights(self) -> None:
        """Store every decoder projection's weight column-major (call once, after loading).

        ``nn.Linear`` computes ``x @ W.T`` with ``W [out, in]``; re-laid out here, ``W.T`` is a
        contiguous ``[in, out]`` matrix, so the CPU GEMM (MKL sgemm) reads it without a transpose.
        Values, shapes and parameter names do not change. On one thread this speeds up the 16-64
        row GEMMs of short prefills by 1.2-1.7x (e.g. ``[64, 512] x [512, 2816]``: 1.05 ms against
        1.32 ms row-major) and leaves 1-row decode and 1,000-row prefill GEMMs unchanged (Intel
        Xeon, 2026-11-30; whole requests: ``benchmarks/engine_prefix_cache.py``,
        docs/benchmarks.md#engine-prefix-cache). Meant for CPU models: GPU
        GEMMs pick their own layout. The embedding (and a tied LM head) keep row-major storage,
        which the token lookup needs.
        """
        for module in self.layers.modules():
            if isinstance(module, nn.Linear):
                module.weight.data = module.weight.data.t().contiguous().t()

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[num_rows, hidden_size]`` -> fp32 logits ``[num_rows, vocab_size]``."""
        logits: torch.Tensor = self.lm_head(hidden)
        return logits.float()

    def load_weights(
        self,
        weights: Iterable[tuple[str, torch.Tensor]],
        on_layer_loaded: Callable[[int], None] | None = None,
    ) -> None:
        """Copy Hugging Face-named tensors into the fused parameters.

        Accepts ``model.embed_tokens.weight``, ``model.layers.N.self_attn.{q,k,v,o}_proj.*``,
        ``model.layers.N.mlp.{gate,up,down}_proj.*``, the two layer norms, ``model.norm.weight``
        and ``lm_head.weight``. With tied embeddings either of embed_tokens / lm_head suffices.

        Args:
            weights: ``(name, tensor)`` pairs, in any order.
            on_layer_loaded: called with ``N`` as soon as every parameter of decoder layer ``N``
                is filled (the loader quantises the layer there, so the float copy of the whole
                model never exists at once). It may replace the layer's modules: parameters are
                looked up by name for each tensor, so no reference to the old ones is kept.

        Raises:
            ModelLoadError: an unknown tensor, a shape mismatch, or a parameter left unloaded.
        """
        loaded: set[str] = set()
        fused = {
            "q_proj": ("qkv_proj", 0),
            "k_proj": ("qkv_proj", 1),
            "v_proj": ("qkv_proj", 2),
            "gate_proj": ("gate_up_proj", 0),
            "up_proj": ("gate_up_proj", 1),
        }
        expected = set()
        for name in dict(self.named_parameters()):
            if "qkv_proj" in name:
                expected |= {f"{name}#{p}" for p in ("q_proj", "k_proj", "v_proj")}
            elif "gate_up_proj" in name:
                expected |= {f"{name}#{p}" for p in ("gate_proj", "up_proj")}
            else:
                expected.add(name)
        pending = [
            {n for n in expected if n.startswith(f"layers.{i}.")} for i in range(len(self.layers))
        ]
        for hf_name, tensor in weights:
            if hf_name.endswith("rotary_emb.inv_freq"):
                continue  # old checkpoints store RoPE buffers; we compute our own
            name = hf_name.removeprefix("model.")
            shard = None
            for part, (target, index) in fused.items():
                if f".{part}." in name:
                    name, shard = name.replace(f".{part}.", f".{target}."), (part, index)
                    break
            if self.config.tie_word_embeddings and name == "lm_head.weight":
                # One shared matrix; a checkpoint may store either. embed_tokens wins if both are.
                if "embed_tokens.weight" in loaded:
                    continue
                name = "embed_tokens.weight"
            key = name if shard is None else f"{name}#{shard[0]}"
            if key not in expected:
                raise ModelLoadError(f"checkpoint tensor {hf_name!r} has no place in the model")
            try:
                param = self.get_parameter(name)
            except AttributeError:  # its layer was loaded (and replaced) already
                raise ModelLoadError(f"checkpoint tensor {hf_name!r} comes twice") from None
            dest = param.data if shard is None else self._shard_view(param.data, name, shard[1])
            if tuple(dest.shape) != tuple(tensor.shape):
                raise ModelLoadError(
                    f"checkpoint tensor {hf_name!r} has shape {tuple(tensor.shape)}, the config "
                    f"implies {tuple(dest.shape)}"
                )
            if dest.data_ptr() != tensor.data_ptr() or dest.stride() != tensor.stride():
                dest.copy_(tensor)  # (a reader may have written the values in place already)
            loaded.add(key)
            if name.startswith("layers.") and on_layer_loaded is not None:
                layer = pending[int(name.split(".", 2)[1])]
                if key in layer:
                    layer.remove(key)
                    if not layer:
                        on_layer_loaded(int(name.split(".", 2)[1]))
        missing = sorted(expected - loaded)
        if missing:
            raise ModelLoadError(
                f"checkpoint is missing {len(missing)} tensor(s), e.g. {', '.join(missing[:4])}"
            )

    def _shard_view(self, data: torch.Tensor, name: str, index: int) -> torch.Tensor:
        """The rows of a fused parameter that one Hugging Face projection fills."""
        c = self.config
        if "qkv_proj" in name:
            q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
            starts, sizes = [0, q, q + kv], [q, kv, kv]
        else:
            starts, sizes = [0, c.intermediate_size], [c.intermediate_size] * 2
        return data.narrow(0, starts[index], sizes[index])
