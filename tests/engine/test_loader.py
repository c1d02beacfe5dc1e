"""The loader: sharded safetensors, tied-embedding variants, dtypes, Hub ids and clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_support import build_tiny_checkpoint, prefill_logits
from safetensors.torch import load_file, save_file

from promptcache.engine.attention import get_backend
from promptcache.engine.loader import load_model, resolve_model_path
from promptcache.engine.model_config import ModelConfig
from promptcache.errors import ConfigError, ModelLoadError

PROMPT = [1, 80, 669, 388, 1844, 144, 614, 752, 284, 67, 1200, 5]


def our_logits(model_dir: Path, dtype: str = "float32") -> torch.Tensor:
    """Logits ``[len(PROMPT), vocab]`` of one prefill through our loader + model (fp32)."""
    model, config = load_model(model_dir, get_backend("torch"), dtype=dtype)
    # a shuffled block table of 4-token blocks, to exercise the paged layout
    return prefill_logits(model, config, PROMPT, block_size=4, block_table=[2, 0, 3, -1])


def hf_logits(model_dir: Path, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    with torch.no_grad():
        return model(torch.tensor([PROMPT])).logits[0].float()


def _rewrite_weights(model_dir: Path, drop: str) -> None:
    path = model_dir / "model.safetensors"
    tensors = load_file(str(path))
    tensors.pop(drop)
    save_file(tensors, str(path), metadata={"format": "pt"})


def test_tinystories_stores_only_lm_head_and_matches_hf(tinystories_dir: Path) -> None:
    torch.testing.assert_close(our_logits(tinystories_dir), hf_logits(tinystories_dir))


def test_sharded_checkpoint_loads(tmp_path: Path) -> None:
    model_dir = build_tiny_checkpoint(
        tmp_path / "sharded", "llama", save_kwargs={"max_shard_size": "100KB"}
    )
    assert len(list(model_dir.glob("*.safetensors"))) > 1
    assert (model_dir / "model.safetensors.index.json").is_file()
    torch.testing.assert_close(our_logits(model_dir), hf_logits(model_dir))


@pytest.mark.parametrize("drop", ["lm_head.weight", "model.embed_tokens.weight"])
def test_tied_embeddings_load_from_either_matrix(tmp_path: Path, drop: str) -> None:
    model_dir = build_tiny_checkpoint(tmp_path / "tied", "qwen2", tie_word_embeddings=True)
    reference = hf_logits(model_dir)
    tensors = load_file(str(model_dir / "model.safetensors"))
    if "lm_head.weight" not in tensors:  # transformers saves one copy: add the other back
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
        save_file(tensors, str(model_dir / "model.safetensors"), metadata={"format": "pt"})
    _rewrite_weights(model_dir, drop)
    torch.testing.assert_close(our_logits(model_dir), reference)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_checkpoints(tmp_path: Path, dtype: str) -> None:
    model_dir = build_tiny_checkpoint(tmp_path / dtype, "llama", dtype=dtype)
    assert ModelConfig.from_pretrained(model_dir).torch_dtype == dtype
    model, _ = load_model(model_dir, get_backend("torch"))  # "auto" keeps the checkpoint dtype
    assert model.embed_tokens.weight.dtype == getattr(torch, dtype)
    # Same weights, run in fp32 by both: equal. Run in the half dtype: close to HF's half run.
    torch.testing.assert_close(our_logits(model_dir, "float32"), hf_logits(model_dir))
    half = our_logits(model_dir, dtype)
    hf_half = hf_logits(model_dir, getattr(torch, dtype))
    assert (half - hf_half).abs().max() < 0.05 * hf_half.abs().max()
    assert (half.argmax(-1) == hf_half.argmax(-1)).float().mean() > 0.9


def test_missing_directory_and_file_paths_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        resolve_model_path(tmp_path / "nope")
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(tmp_path / "nope", get_backend("torch"))
    with pytest.raises(ModelLoadError, match=r"GGUF file .*model\.gguf' does not exist"):
        resolve_model_path(tmp_path / "model.gguf")
    (tmp_path / "file.bin").write_bytes(b"x")
    with pytest.raises(ModelLoadError, match="is a file"):
        resolve_model_path(tmp_path / "file.bin")
    with pytest.raises(ModelLoadError, match=r"config\.json not found"):
        load_model(tmp_path, get_backend("torch"))


def test_unsupported_architecture_names_the_supported_ones(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})
    )
    with pytest.raises(ModelLoadError, match=r"GPT2LMHeadModel.*LlamaForCausalLM"):
        load_model(tmp_path, get_backend("torch"))


def test_unsupported_rope_type_is_rejected(tmp_path: Path) -> None:
    raw: dict[str, Any] = json.loads(
        (build_tiny_checkpoint(tmp_path, "llama") / "config.json").read_text()
    )
    raw["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}
    with pytest.raises(ModelLoadError, match="rope_type 'yarn' is not supported"):
        ModelConfig.from_dict(raw)


def test_weight_problems_name_the_tensor(tmp_path: Path) -> None:
    model_dir = build_tiny_checkpoint(tmp_path / "ok", "llama")
    broken = tmp_path / "missing"
    shutil.copytree(model_dir, broken)
    _rewrite_weights(broken, "model.layers.1.mlp.up_proj.weight")
    with pytest.raises(ModelLoadError, match=r"missing 1 tensor.*layers\.1\.mlp\.gate_up_proj"):
        load_model(broken, get_backend("torch"))

    extra = tmp_path / "extra"
    shutil.copytree(model_dir, extra)
    tensors = load_file(str(extra / "model.safetensors"))
    tensors["model.layers.0.self_attn.q_norm.weight"] = torch.ones(16)
    save_file(tensors, str(extra / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match=r"q_norm\.weight' has no place"):
        load_model(extra, get_backend("torch"))

    wrong = tmp_path / "wrong"
    shutil.copytree(model_dir, wrong)
    config = json.loads((wrong / "config.json").read_text())
    config["intermediate_size"] = 96
    (wrong / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=r"shape \(64, 128\), the config implies \(64, 96\)"):
        load_model(wrong, get_backend("torch"))

    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(model_dir / "config.json", empty / "config.json")
    with pytest.raises(ModelLoadError, match=r"no \*\.safetensors"):
        load_model(empty, get_backend("torch"))


def test_hub_id_offline_without_cache_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # "org/name" must not resolve as a local path
    expected = "cannot fetch 'promptcache-tests/absent-model'"
    with pytest.raises(ModelLoadError, match=expected) as info:
        resolve_model_path("promptcache-tests/absent-model")
    assert "`hf download promptcache-tests/absent-model`" in str(info.value)  # not "{text}"


def test_sliding_window_needs_a_backend_that_masks_it(tiny_checkpoint: Any) -> None:
    from promptcache.engine.attention.torch_ref import TorchAttentionBackend

    class NoWindowBackend(TorchAttentionBackend):
        supports_sliding_window = False

    model_dir = tiny_checkpoint("mistral")  # sliding_window=8
    with pytest.raises(ConfigError, match="8-token sliding window"):
        load_model(model_dir, NoWindowBackend())
    model, _ = load_model(model_dir, NoWindowBackend(), max_positions=8)  # window never binds
    assert model.config.sliding_windows == (8, 8)


def test_load_weights_reports_each_layer_once_and_refuses_a_duplicate(tmp_path: Path) -> None:
    """``on_layer_loaded`` fires once per decoder layer, when its last tensor is in; a tensor of
    a layer already replaced there is a ``ModelLoadError``, not an AttributeError."""
    from promptcache.engine.loader import iter_safetensors
    from promptcache.engine.models.quant_linear import quantize_decoder_layer

    model_dir = build_tiny_checkpoint(tmp_path / "dup", "llama")
    model, _ = load_model(model_dir, get_backend("torch"), dtype="float32")
    tensors = list(iter_safetensors(model_dir))
    seen: list[int] = []
    model.load_weights(tensors, seen.append)
    assert sorted(seen) == list(range(len(model.layers)))

    def replace(index: int) -> None:
        quantize_decoder_layer(model.layers[index], "int8")

    dup = next(t for t in tensors if ".layers.0.self_attn.q_proj.weight" in t[0])
    with pytest.raises(ModelLoadError, match="comes twice"):
        model.load_weights([*tensors, dup], replace)
