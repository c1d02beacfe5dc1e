"""Find a checkpoint (local directory, GGUF file or Hugging Face Hub id) and load its weights.

Supported: ``LlamaForCausalLM``, ``Qwen2ForCausalLM`` and ``MistralForCausalLM`` directories with
``config.json`` and either one ``*.safetensors`` file or several listed in
``model.safetensors.index.json``; weights stored in fp32, bf16 or fp16 and cast to the dtype asked
for. Tied embeddings load from whichever of ``embed_tokens`` / ``lm_head`` the checkpoint stores.
A Hub id is downloaded with ``huggingface_hub.snapshot_download`` (or read from its local cache);
without network and without a cached copy the user gets a ``ModelLoadError`` saying so.
A ``*.gguf`` file (llama.cpp's format) loads through ``gguf_file`` / ``gguf_weights``: config from
its metadata, weights dequantised to the dtype asked for.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from promptcache.errors import ConfigError, ModelLoadError

from .attention.base import AttentionBackend
from .gguf_file import is_gguf, release
from .model_config import ModelConfig
from .models.llama import LlamaForCausalLM
from .models.quant_linear import (
    check_quantizable,
    quantize_decoder_layer,
    quantize_linears,
    quantize_vocabulary,
)

__all__ = ["iter_safetensors", "load_model", "resolve_model_path", "torch_dtype"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_HUB_FILES = ["*.json", "*.safetensors", "*.jinja", "tokenizer.model"]
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def torch_dtype(name: str, config: ModelConfig) -> torch.dtype:
    """Map "auto" (the checkpoint's dtype) / "float32" / "bfloat16" / "float16" to a torch dtype.

    Raises:
        ModelLoadError: an unknown name.
    """
    key = config.torch_dtype if name == "auto" else name
    if key not in _DTYPES:
        raise ModelLoadError(f"dtype={name!r} is not supported; use auto, {', '.join(_DTYPES)}")
    return _DTYPES[key]


def resolve_model_path(model: str | Path) -> Path:
    """Return a local checkpoint directory for a path or a Hugging Face Hub id.

    A string that names an existing directory or GGUF file is used as is. A string shaped like
    ``org/name`` that is not a local path is fetched with ``huggingface_hub`` (config, tokenizer
    and safetensors files only; the local Hub cache is tried first).

    Raises:
        ModelLoadError: the directory does not exist, or the Hub id cannot be fetched (offline,
            unknown repository, gated model).
    """
    path = Path(model).expanduser()
    if path.is_dir() or is_gguf(path):
        return path
    text = str(model)
    if path.exists():
        raise ModelLoadError(
            f"model {text!r} is a file; pass the checkpoint's directory or a .gguf file"
        )
    if not _HUB_ID.match(text):
        what = "GGUF file" if path.suffix.lower() == ".gguf" else "model directory"
        raise ModelLoadError(
            f"{what} {text!r} does not exist; pass a directory with config.json and "
            "*.safetensors, a .gguf file, or a Hugging Face Hub id such as "
            "'Qwen/Qwen2.5-0.5B-Instruct'"
        )
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - huggingface_hub ships with transformers
        raise ModelLoadError(
            f"{text!r} is not a local directory and huggingface_hub is not installed"
        ) from exc
    try:
        return Path(snapshot_download(text, allow_patterns=_HUB_FILES, local_files_only=True))
    except Exception:  # not cached: fall through to a download
        pass
    try:
        return Path(snapshot_download(text, allow_patterns=_HUB_FILES))
    except Exception as exc:  # huggingface_hub raises many unrelated types
        reason = " ".join(str(exc).split())  # its messages span lines; the error is one line
        raise ModelLoadError(
            f"cannot fetch {text!r} from the Hugging Face Hub ({type(exc).__name__}: {reason}). "
            f"Offline? Download it where there is network (`hf download {text}`) and pass "
            "the local directory instead."
        ) from exc


def _safetensors_files(model_dir: Path) -> list[Path]:
    """Every weight file of the checkpoint, from the index if there is one."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, KeyError, json.JSONDecodeError) as exc:
            raise ModelLoadError(f"cannot read {index}: {exc}") from exc
        files = [model_dir / name for name in sorted(set(weight_map.values()))]
        absent = [f.name for f in files if not f.is_file()]
        if absent:
            raise ModelLoadError(f"{index} lists shard(s) that are missing: {', '.join(absent)}")
        return files
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        hint = (
            " (only .bin weights found; convert them to safetensors)"
            if any(model_dir.glob("*.bin"))
            else ""
        )
        raise ModelLoadError(f"no *.safetensors weights in {model_dir}{hint}")
    return files


def iter_safetensors(model_dir: Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(hf_name, tensor)`` for every tensor of every weight file, one at a time.

    Raises:
        ModelLoadError: no weights, a listed shard is missing, or a file is not safetensors.
    """
    from safetensors import SafetensorError, safe_open

    for file in _safetensors_files(model_dir):
        try:
            with safe_open(str(file), framework="pt") as f:
                for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                    yield name, f.get_tensor(name)
        except (SafetensorError, OSError) as exc:
            raise ModelLoadError(f"cannot read {file}: {exc}") from exc


class _SkipInit(TorchFunctionMode):
    """Skip ``torch.nn.init``'s initialisers while a model is built.

    Every parameter is overwritten by the checkpoint (``load_weights`` raises for one left
    unloaded), so initialising them would only cost time and touch every page. (Building on the
    meta device instead makes torch import its Python decompositions for ``normal_`` / ``arange``
    there: about 150 MB of resident modules, measured with torch 2.13.)
    """

    _INITS = frozenset(
        f for name, f in vars(torch.nn.init).items() if name.endswith("_") and callable(f)
    )

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in self._INITS:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def _vocabulary_quantized_once_loaded(
    weights: Iterator[tuple[str, torch.Tensor]], model: LlamaForCausalLM
) -> Iterator[tuple[str, torch.Tensor]]:
    """Pass ``weights`` through; once the token embedding (and an untied LM head) has been
    copied into the model, quantise them (``quantize_vocabulary``), so their float copies (113
    MB for SmolLM2's tied 49,152 x 576 matrix in fp32) are freed before the decoder layers load.

    For GGUF files only: their names are unique (``token_embd``, and ``output`` only when
    untied), and llama.cpp writes ``token_embd`` first. A safetensors checkpoint of a tied
    model may store both names, so it is quantised at the end of the load.

    The file's values are dequantised straight into the model's matrix (``iter_gguf_tensors``'
    ``into``), so no second fp32 copy exists. The quantisation runs one tensor later, once
    ``load_weights``' loop has taken the next tensor and let go of the matrix it was given.
    """
    waiting = {"model.embed_tokens.weight"}
    if not model.config.tie_word_embeddings:
        waiting.add("lm_head.weight")
    loaded = False
    for name, tensor in weights:
        yield name, tensor
        # load_weights asks for the next tensor only after copying this one in
        if loaded:
            quantize_vocabulary(model)
            loaded = False
        if waiting:
            waiting.discard(name)
            loaded = not waiting
    if loaded:
        quantize_vocabulary(model)


def load_model(
    model_dir: str | Path,
    backend: AttentionBackend,
    dtype: str = "auto",
    max_positions: int | None = None,
    device: str | torch.device = "cpu",
    weight_dtype: str = "auto",
    pack_for_cpu_kernel: bool = False,
) -> tuple[LlamaForCausalLM, ModelConfig]:
    """Build the model for ``model_dir`` and fill it with the checkpoint's weights.

    Args:
        model_dir: a local checkpoint directory or GGUF file (see ``resolve_model_path`` for
            Hub ids).
        backend: the attention backend every layer will call.
        dtype: "auto" (the checkpoint's ``torch_dtype``), "float32", "bfloat16" or "float16".
        max_positions: RoPE table length in tokens; default ``max_position_embeddings``.
        device: where the weights live.
        weight_dtype: "auto" (linear weights in ``dtype``) or "int8" / "int4" (weight-only
            quantised layer by layer while loading, see ``models/quant_linear.py``; CPU only).
        pack_for_cpu_kernel: with ``weight_dtype="int4"`` and float32 weights on the CPU, pack
            each decoder layer for the fused CPU kernel as soon as it is quantised and free its
            dense copy (``cpu_decode.pack_layer_weights``), so the dense copies of the whole
            model never exist at once; nothing happens where the kernel's library cannot be
            built. ``FusedDecode.build`` then reuses the packed weights.

    Returns:
        ``(model in eval mode, its ModelConfig)``.

    Raises:
        ModelLoadError: missing directory/config/weights, unsupported architecture, or weights
            that do not fit the config.
        ConfigError: a sliding-window model on a backend without window support, or a
            ``weight_dtype`` that is unknown or asked for off the CPU.
    """
    model_dir = Path(model_dir)
    gguf = is_gguf(model_dir)
    if not gguf and not model_dir.is_dir():
        raise ModelLoadError(f"model directory {str(model_dir)!r} does not exist")
    config = ModelConfig.from_pretrained(model_dir)
    target = torch_dtype(dtype, config)
    if not backend.supports_sliding_window:
        windows = [w for w in config.sliding_windows if w is not None]
        if windows and (max_positions or config.max_position_embeddings) > min(windows):
            raise ConfigError(
                f"this model uses a {min(windows)}-token sliding window, which the "
                f"{backend.name!r} attention backend does not implement; use the torch backend "
                f"or a max_model_len <= {min(windows)}"
            )
    quantize = weight_dtype != "auto"
    if quantize:
        check_quantizable(weight_dtype, device)
    # Built straight on the device with uninitialised storage: a page of the float model becomes
    # resident only when its weights are copied in, and with weight_dtype int8/int4 each decoder
    # layer is quantised (and its float weights freed) as soon as it is loaded, so the whole
    # float model never exists at once.
    with torch.device(device), _SkipInit():
        model = LlamaForCausalLM(config, backend, max_positions or config.max_position_embeddings)
    model.to(target)
    model.tie_weights()

    from .cpu_decode import CpuDecodeUnavailable, load_library, pack_layer_weights

    kernel_library = None
    if pack_for_cpu_kernel and weight_dtype == "int4" and target == torch.float32:
        # where the library cannot be built, the runner says why when it builds the kernel
        with contextlib.suppress(CpuDecodeUnavailable):
            kernel_library = load_library()

    def quantize_layer(index: int) -> None:
        # a dense copy the kernel's packing reads once and frees is not prepacked for oneDNN
        quantize_decoder_layer(model.layers[index], weight_dtype, prepack=kernel_library is None)
        if kernel_library is not None:
            pack_layer_weights(model.layers[index], kernel_library)

    on_layer_loaded = quantize_layer if quantize else None
    with torch.no_grad():
        if gguf:
            from .gguf_weights import iter_gguf_tensors

            # The vocabulary is dequantised straight into the model's matrices.
            into = {"model.embed_tokens.weight": model.embed_tokens.weight.data}
            if not config.tie_word_embeddings:
                into["lm_head.weight"] = model.lm_head.weight.data
            tensors = iter_gguf_tensors(model_dir, config, target, into)
            if quantize:
                tensors = _vocabulary_quantized_once_loaded(tensors, model)
            model.load_weights(tensors, on_layer_loaded)
            release(model_dir)  # the parsed metadata is no longer needed
        else:
            model.load_weights(iter_safetensors(model_dir), on_layer_loaded)
        if quantize:
            quantize_linears(model, weight_dtype)  # the LM head and the embedding
    if not quantize and torch.device(device).type == "cpu":
        model.use_column_major_weights()
    return model.eval(), config
