"""GGUF files written here from tinystories-656k (``gguf_convert``): weights, q/k permutation,
the sentencepiece tokenizer, kv-size and the one-line errors, against the safetensors load of the
same checkpoint and against transformers' own GGUF loading."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from gguf_convert import add_tensor, convert_llama, permute, write

from promptcache.cli import cli
from promptcache.engine import LLM, ModelConfig, SamplingParams, Tokenizer
from promptcache.engine.attention import get_backend
from promptcache.engine.gguf_file import native_weight_dtype
from promptcache.engine.loader import load_model
from promptcache.errors import ModelLoadError

STRINGS = [
    "Once upon a time, there was a little girl named Lily.",
    "  leading spaces",
    "trailing spaces   ",
    "tabs\tand\nnew\n\nlines",
    "numbers 1234567890 and 3.14",
    "Ünïcödé façade naïve café",
    "emoji 😀🎉 and CJK 你好",
    "def f(x):\n    return x * 2  # code",
    "<|start_story|>Tom ran.<|end_story|>",
    "",
    " ",
]


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gguf")


@pytest.fixture(scope="module")
def f32_file(tinystories_dir: Path, gguf_dir: Path) -> Path:
    return convert_llama(tinystories_dir, gguf_dir / "tiny-f32.gguf", "F32")


@pytest.fixture(scope="module")
def q8_file(tinystories_dir: Path, gguf_dir: Path) -> Path:
    return convert_llama(tinystories_dir, gguf_dir / "tiny-q8_0.gguf", "Q8_0")


def test_f32_file_loads_exactly_the_safetensors_weights(
    tinystories_dir: Path, f32_file: Path
) -> None:
    backend = get_backend("torch")
    ours, config = load_model(f32_file, backend, dtype="float32")
    ref, ref_config = load_model(tinystories_dir, backend, dtype="float32")
    assert config.kv_bytes_per_token() == ref_config.kv_bytes_per_token()
    assert config.tie_word_embeddings  # no output.weight in the file
    ref_params = dict(ref.named_parameters())
    for name, param in ours.named_parameters():
        assert torch.equal(param, ref_params[name]), name  # q/k rows back in HF order


def test_qwen2_file_loads_exactly_the_safetensors_weights(
    tiny_checkpoint: Any, gguf_dir: Path
) -> None:
    model_dir = tiny_checkpoint("qwen2")
    path = convert_llama(model_dir, gguf_dir / "qwen2.gguf", "F32")
    backend = get_backend("torch")
    ours, config = load_model(path, backend, dtype="float32")
    ref, ref_config = load_model(model_dir, backend, dtype="float32")
    # Everything equal (qkv biases, tied head, GQA 4:1...) but the epsilon, which GGUF stores
    # as a float32 (1e-6 -> 9.99999997e-07).
    assert config.rms_norm_eps == pytest.approx(ref_config.rms_norm_eps, rel=1e-7)
    assert dataclasses.replace(config, rms_norm_eps=ref_config.rms_norm_eps) == ref_config
    ref_params = dict(ref.named_parameters())
    for name, param in ours.named_parameters():
        assert torch.equal(param, ref_params[name]), name  # no permutation in Qwen2 files


@pytest.mark.parametrize("weight_type", ["Q8_0", "Q4_0"])
def test_quantised_file_greedy_matches_transformers(
    tinystories_dir: Path, gguf_dir: Path, weight_type: str, prompts: list[str]
) -> None:
    from transformers import AutoModelForCausalLM

    path = convert_llama(tinystories_dir, gguf_dir / f"tiny-{weight_type}.gguf", weight_type)
    hf = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    llm = LLM(path, dtype="float32", num_blocks=64)
    batch = [llm.tokenizer.encode(p) for p in prompts[:4]]
    outs = llm.generate(batch, SamplingParams(temperature=0, max_tokens=12))
    for ids, out in zip(batch, outs, strict=True):
        with torch.no_grad():
            ref = hf.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=12,
                do_sample=False,
            )
        assert out.output_token_ids == ref[0, len(ids) :].tolist()


def test_sentencepiece_tokenizer_matches_transformers(f32_file: Path, prompts: list[str]) -> None:
    from transformers import AutoTokenizer

    ours = Tokenizer.from_pretrained(f32_file)
    ref = AutoTokenizer.from_pretrained(f32_file.parent, gguf_file=f32_file.name)
    for text in [*STRINGS, *prompts]:
        for special in (True, False):
            expected = list(ref(text, add_special_tokens=special)["input_ids"])
            assert ours.encode(text, add_special_tokens=special) == expected, (text, special)
        ids = ours.encode(text)
        assert ours.decode(ids) == ref.decode(ids, skip_special_tokens=True), text
    assert ours.bos_token_id == ref.bos_token_id == 1
    assert ours.eos_token_id == ref.eos_token_id == 2
    messages = [{"role": "user", "content": "Tell me a story"}]
    rendered = ours.apply_chat_template(messages, add_generation_prompt=True)
    assert rendered == ref.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert rendered == "<|start_story|>user: Tell me a story<|end_story|>assistant:"


def test_unpermute_inverts_convert_hf_to_gguf_permute() -> None:
    from promptcache.engine.gguf_weights import unpermute_qk

    rng = np.random.default_rng(0)
    for heads, head_dim, cols in [(8, 16, 128), (3, 64, 576), (1, 4, 2), (9, 64, 0)]:
        shape = (heads * head_dim, cols) if cols else (heads * head_dim,)  # weight or bias
        hf = rng.standard_normal(shape).astype(np.float32)
        stored = permute(hf, heads)
        assert not np.array_equal(stored, hf)
        assert np.array_equal(unpermute_qk(stored, heads), hf)
    # Quantised rows: reordering the block bytes then dequantising = dequantising then reordering.
    from gguf.quants import dequantize, quantize

    q8 = gguf.GGMLQuantizationType.Q8_0
    stored = quantize(permute(rng.standard_normal((96, 64)).astype(np.float32), 3), q8)
    assert stored.dtype == np.uint8 and stored.shape == (96, 68)
    assert np.array_equal(
        dequantize(unpermute_qk(stored, 3), q8), unpermute_qk(dequantize(stored, q8), 3)
    )


def _kv_size(path: Path, *args: str) -> Any:
    import json

    result = CliRunner().invoke(cli, ["engine", "kv-size", "--model", str(path), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_kv_size_on_a_gguf_file(f32_file: Path) -> None:
    # Independent count straight from the file's metadata with gguf's reader:
    # 2 (K and V) x layers x KV heads x (hidden / heads) x 4 bytes (float32).
    reader = gguf.GGUFReader(f32_file)

    def value(key: str) -> int:
        return int(reader.get_field(key).contents())  # type: ignore[union-attr]

    head_dim = value("llama.embedding_length") // value("llama.attention.head_count")
    expected = 2 * value("llama.block_count") * value("llama.attention.head_count_kv") * head_dim
    size = _kv_size(f32_file, "--tokens", "100")
    assert size["bytes_per_token"] == expected * 4 == 1024
    assert size["bytes_per_request"] == 100 * expected * 4
    assert _kv_size(f32_file, "--kv-cache-dtype", "int8")["bytes_per_token"] == expected


def _tiny_file(path: Path, arch: str = "llama", tensor_type: str = "F32") -> Path:
    """A one-layer GGUF file with a byte-level vocabulary and one tensor of ``tensor_type``."""
    writer = gguf.GGUFWriter(path, arch)
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(32)
    writer.add_feed_forward_length(64)
    writer.add_head_count(2)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([chr(c) for c in range(ord("a"), ord("z") + 1)])
    writer.add_token_merges([])
    add_tensor(writer, "token_embd.weight", np.ones((26, 32), np.float32), "F32")
    add_tensor(writer, "blk.0.attn_q.weight", np.ones((32, 32), np.float32), "F32")
    add_tensor(writer, "blk.0.ffn_up.weight", np.ones((64, 256), np.float32), tensor_type)
    write(writer)
    return path


def _free_port() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def _cli_error(*args: str) -> str:
    result = CliRunner().invoke(cli, ["engine", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    return result.output


def test_an_unsupported_architecture_is_a_one_line_error(tmp_path: Path) -> None:
    path = _tiny_file(tmp_path / "mamba.gguf", arch="mamba")
    with pytest.raises(ModelLoadError, match="GGUF architecture 'mamba' is not supported"):
        ModelConfig.from_pretrained(path)
    assert "'mamba' is not supported" in _cli_error("kv-size", "--model", str(path))
    out = _cli_error("serve", "--model", str(path), "--threads", "1", "--port", _free_port())
    assert "'mamba' is not supported" in out


def test_an_unsupported_tensor_type_is_a_one_line_error(tmp_path: Path) -> None:
    path = _tiny_file(tmp_path / "tq.gguf", tensor_type="TQ1_0")
    with pytest.raises(ModelLoadError, match=r"'blk\.0\.ffn_up\.weight' has GGML type TQ1_0"):
        load_model(path, get_backend("torch"))
    out = _cli_error("serve", "--model", str(path), "--threads", "1", "--port", _free_port())
    assert "GGML type TQ1_0" in out and "supported: F32, F16, BF16" in out


def test_a_file_that_is_not_gguf_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"not a gguf file at all")
    assert "cannot read" in _cli_error("kv-size", "--model", str(path))


@pytest.mark.parametrize(
    ("weight_type", "expected"),
    [("F32", "auto"), ("F16", "auto"), ("Q8_0", "int8"), ("Q5_0", "int8"), ("Q4_1", "int4")],
)
def test_native_weight_dtype_follows_the_decoder_weights(
    tinystories_dir: Path, gguf_dir: Path, weight_type: str, expected: str
) -> None:
    path = convert_llama(tinystories_dir, gguf_dir / f"tiny-native-{weight_type}.gguf", weight_type)
    assert native_weight_dtype(path) == expected


def _projections(path: Path, tensors: dict[str, tuple[tuple[int, int], str]]) -> Path:
    """A GGUF file holding only the named tensors, ``name -> ((out, in), type)``."""
    writer = gguf.GGUFWriter(path, "llama")
    for name, (shape, type_name) in tensors.items():
        add_tensor(writer, name, np.ones(shape, np.float32), type_name)
    write(writer)
    return path


def test_native_weight_dtype_of_mixed_and_unpackable_files(tmp_path: Path) -> None:
    four_bit = {
        "blk.0.attn_q.weight": ((32, 64), "Q4_0"),
        "blk.0.ffn_up.weight": ((64, 32), "Q4_1"),
    }
    assert native_weight_dtype(_projections(tmp_path / "q4.gguf", four_bit)) == "int4"
    # the widest projection decides: one 8-bit layer makes the file int8, one float layer auto
    mixed = {**four_bit, "blk.0.ffn_down.weight": ((32, 64), "Q8_0")}
    assert native_weight_dtype(_projections(tmp_path / "q4-q8.gguf", mixed)) == "int8"
    floats = {**four_bit, "blk.0.attn_v.weight": ((32, 32), "F16")}
    assert native_weight_dtype(_projections(tmp_path / "q4-f16.gguf", floats)) == "auto"
    # 24 output rows: not a multiple of the int4 packer's 16-row tile, so int8
    ragged = {**four_bit, "blk.0.attn_k.weight": ((24, 64), "Q4_0")}
    assert native_weight_dtype(_projections(tmp_path / "ragged.gguf", ragged)) == "int8"
    # only non-decoder tensors (an embedding): nothing to store in int4 / int8
    embedding = {"token_embd.weight": ((16, 32), "Q4_0")}
    assert native_weight_dtype(_projections(tmp_path / "embd.gguf", embedding)) == "auto"
    with pytest.raises(ModelLoadError, match="is a directory, not a GGUF file"):
        native_weight_dtype(tmp_path)
