"""Write small GGUF files for the tests with ``gguf.GGUFWriter``, the way llama.cpp's
``convert_hf_to_gguf.py`` does (tensor names, q/k row permutation, metadata keys), but written
here independently of the loader under test.

``convert_llama`` turns a Llama or Qwen2 safetensors checkpoint (tinystories-656k, the random
tiny checkpoints) into a GGUF file with weights stored as F32 / F16 / Q8_0 / Q4_0... (norms stay
F32, as llama.cpp keeps them) and its tokenizer written as a sentencepiece ("llama")
vocabulary. Only Llama files get the q/k row permutation (llama.cpp's Qwen2 converter has none).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

# HF name part -> GGUF name part (llama.cpp's gguf-py/gguf/tensor_mapping.py for Llama).
_LAYER_PARTS = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """``LlamaModel.permute`` of convert_hf_to_gguf.py: HF rotate-half rows -> GGUF rows."""
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def gguf_name(hf: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf.split(".", 3)
    part, kind = rest.rsplit(".", 1)
    return f"blk.{layer}.{_LAYER_PARTS[part]}.{kind}"


def add_tensor(writer: Any, name: str, values: np.ndarray, type_name: str) -> None:
    """Store ``values`` (float32) as ``type_name``, quantised with ``gguf.quants.quantize``."""
    import gguf
    from gguf.quants import quantize

    qtype = gguf.GGMLQuantizationType[type_name]
    if type_name == "F32":
        writer.add_tensor(name, values.astype(np.float32))
    elif type_name == "F16":
        writer.add_tensor(name, values.astype(np.float16))
    else:
        writer.add_tensor(name, quantize(values.astype(np.float32), qtype), raw_dtype=qtype)


def write(writer: Any) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def convert_llama(model_dir: Path, out: Path, weight_type: str = "F32") -> Path:
    """Write ``model_dir`` (a Llama or Qwen2 safetensors checkpoint) as the GGUF file ``out``.

    2-D weights are stored as ``weight_type``; 1-D norms as F32. Returns ``out``.
    """
    import gguf
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    tok_json = json.loads((model_dir / "tokenizer.json").read_text())
    tok_config = json.loads((model_dir / "tokenizer_config.json").read_text())
    arch = config["model_type"]  # "llama" or "qwen2": the GGUF architecture name too
    rope = config.get("rope_parameters") or {}
    writer = gguf.GGUFWriter(out, arch)
    writer.add_name("tinystories-656k")
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_rope_freq_base(config.get("rope_theta") or rope.get("rope_theta", 10000.0))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_dimension_count(config["hidden_size"] // config["num_attention_heads"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(0 if weight_type == "F32" else 1 if weight_type == "F16" else 7)

    vocab = tok_json["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    special = {t["content"] for t in tok_json["added_tokens"]}
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    # Sentencepiece BPE scores: a token made by an earlier merge scores higher (-id).
    writer.add_token_scores([-float(i) for i in range(len(tokens))])
    writer.add_token_types(
        [2 if t == "<unk>" else 3 if t in special else 1 for t in tokens]  # UNKNOWN/CONTROL/NORMAL
    )
    writer.add_bos_token_id(vocab[tok_config["bos_token"]])
    writer.add_eos_token_id(vocab[tok_config["eos_token"]])
    writer.add_unk_token_id(vocab["<unk>"])
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(
        "{% for m in messages %}{{ bos_token + m['role'] + ': ' + m['content'] + eos_token }}"
        "{% endfor %}{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}"
    )

    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    weights = load_file(str(model_dir / "model.safetensors"))
    if config.get("tie_word_embeddings"):
        # One shared matrix, stored as token_embd (tinystories saves it as lm_head only).
        shared = weights.pop("lm_head.weight", None)
        weights.setdefault("model.embed_tokens.weight", shared)
    for name, values in weights.items():
        if arch == "llama" and name.endswith("q_proj.weight"):
            values = permute(values, heads)
        elif arch == "llama" and name.endswith("k_proj.weight"):
            values = permute(values, kv_heads)
        add_tensor(writer, gguf_name(name), values, weight_type if values.ndim == 2 else "F32")
    write(writer)
    return out
