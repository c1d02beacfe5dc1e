"""The model's shape, read from a Hugging Face ``config.json`` (torch-free).

``ModelConfig`` is everything the engine needs to know about a checkpoint before loading a single
weight: layer count, heads, head size, RoPE settings, sliding windows and special token ids. It is
torch-free so the CLI (``promptcache engine kv-size``) and the scheduler side can size a KV cache
without importing torch.

Both config dialects are read: transformers 4.x (``rope_theta`` + ``rope_scaling``) and
transformers 5.x (``rope_parameters`` holding ``rope_theta`` and ``rope_type``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptcache.errors import ModelLoadError

from .gguf_file import gguf_model_config, is_gguf

__all__ = [
    "DTYPE_BYTES",
    "MAX_RMS_NORM_EPS",
    "MAX_ROPE_FACTOR",
    "SHAPE_LIMITS",
    "SUPPORTED_ARCHITECTURES",
    "ModelConfig",
    "read_generation_eos_ids",
]

#: Architectures the loader understands, as written in config.json's ``architectures`` list.
SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")

#: ``model_type`` -> architecture, for a config.json without ``architectures`` (transformers'
#: AutoModelForCausalLM resolves such configs the same way).
_ARCH_BY_MODEL_TYPE = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "mistral": "MistralForCausalLM",
}

#: RoPE variants implemented in ``models/llama.py`` (``rope_type`` in config.json).
SUPPORTED_ROPE_TYPES = ("default", "linear", "dynamic", "llama3")

#: Largest value accepted for each integer shape field of config.json, checked before anything is
#: sized or allocated (``[None] * num_hidden_layers``, RoPE tables, the KV pool). Each is far above
#: every released checkpoint (the largest seen: 126 layers and 128 query heads in Llama 3.1 405B,
#: width 16384, MLP width 53248, head_dim 256, a 262144-token vocabulary in Gemma 3 and 10,485,760
#: positions in Llama 4 Scout), so only a typo or a corrupt file reaches them; without them a
#: value such as 10**30 ends in an OverflowError or MemoryError, and 10**9 in gigabytes allocated
#: for nothing.
SHAPE_LIMITS = {
    "num_hidden_layers": 1024,
    "num_attention_heads": 1024,
    "num_key_value_heads": 1024,
    "head_dim": 16384,
    "hidden_size": 2**17,  # 131072
    "intermediate_size": 2**20,  # 1048576
    "vocab_size": 2**24,  # 16777216
    "max_position_embeddings": 2**26,  # 67108864
    "sliding_window": 2**26,
    "original_max_position_embeddings": 2**26,
}

#: Largest RoPE scaling ``factor`` (and llama3 ``low_freq_factor`` / ``high_freq_factor``)
#: accepted; released checkpoints use 2 to 64. Also keeps ``max_position_embeddings x factor``
#: a modest integer.
MAX_ROPE_FACTOR = 1024.0

#: ``rms_norm_eps`` must lie in (0, MAX_RMS_NORM_EPS): 0 or less divides by zero or takes the
#: square root of a negative number (NaN logits); real checkpoints use 1e-6 to 1e-5.
MAX_RMS_NORM_EPS = 1.0

#: Parameters each scaled rope_type needs in ``rope_scaling`` / ``rope_parameters``.
_ROPE_REQUIRED_KEYS = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}

#: Bytes per element of the dtype names used in config.json and ``--kv-cache-dtype``.
DTYPE_BYTES = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "int8": 1,
    "fp8": 1,
    "float8_e4m3fn": 1,
}


@dataclass(frozen=True)
class ModelConfig:
    """Shape and settings of a Llama-family decoder-only model.

    Attributes:
        architecture: one of ``SUPPORTED_ARCHITECTURES``.
        vocab_size: rows of the embedding and the LM head.
        hidden_size: model width (residual stream size).
        intermediate_size: width of the SwiGLU MLP.
        num_hidden_layers: decoder layers.
        num_attention_heads: query heads.
        num_key_value_heads: KV heads (== query heads: MHA; 1: MQA; otherwise GQA).
        head_dim: size of one head (``head_dim`` in config.json, else hidden / heads).
        rms_norm_eps: epsilon of every RMSNorm.
        max_position_embeddings: positions the model was trained for (tokens).
        rope_theta: RoPE base.
        rope_scaling: the ``rope_type`` and its parameters, or None for plain RoPE.
        tie_word_embeddings: the LM head shares the input embedding matrix.
        qkv_bias / o_bias / mlp_bias: which projections carry a bias (Qwen2: qkv only).
        sliding_windows: per layer, the attention window in tokens (None = full attention).
        torch_dtype: the checkpoint's dtype name ("float32", "bfloat16", "float16").
        bos_token_id: the BOS id or None.
        eos_token_ids: every id that ends generation per config.json (may be empty).
    """

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    tie_word_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    sliding_windows: tuple[int | None, ...]
    torch_dtype: str
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]

    @classmethod
    def from_pretrained(cls, model_dir: str | Path) -> ModelConfig:
        """Read ``<model_dir>/config.json``, or the metadata of a GGUF file
        (``gguf_file.gguf_model_config``).

        Raises:
            ModelLoadError: the file is missing or not JSON, the architecture or RoPE type is not
                supported, or a required field is missing.
        """
        if is_gguf(model_dir):
            return gguf_model_config(model_dir)
        path = Path(model_dir) / "config.json"
        if not path.is_file():
            raise ModelLoadError(
                f"{path} not found: pass a directory holding a Hugging Face checkpoint "
                "(config.json, *.safetensors, tokenizer.json)"
            )
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # ValueError: not JSON, not UTF-8
            raise ModelLoadError(f"cannot read {path}: {exc}") from exc
        if not isinstance(raw, dict):
            raise ModelLoadError(f"{path} must hold a JSON object")
        return cls.from_dict(raw, source=str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "config.json") -> ModelConfig:
        """Build from a parsed config.json dict (see ``from_pretrained`` for errors).

        Every shape field must be a positive integer at most its ``SHAPE_LIMITS`` entry
        (``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``, ``hidden_size``,
        ``intermediate_size``, ``vocab_size``, ``head_dim``, ``max_position_embeddings``),
        ``rms_norm_eps`` a number in (0, 1), and ``rope_scaling`` a supported ``rope_type`` with
        its parameters (finite, ``factor`` from 1 to ``MAX_ROPE_FACTOR``); a bad value raises
        ``ModelLoadError`` naming the field, the value and ``source``.
        """
        arch = _read_architecture(raw, source)
        hidden = _positive_int(raw, "hidden_size", source)
        num_heads = _positive_int(raw, "num_attention_heads", source)
        num_layers = _positive_int(raw, "num_hidden_layers", source)
        num_kv_heads = _positive_int(raw, "num_key_value_heads", source, default=num_heads)
        if num_heads % num_kv_heads:
            raise ModelLoadError(
                f"{source}: num_attention_heads={num_heads} is not a multiple of "
                f"num_key_value_heads={num_kv_heads}"
            )
        if raw.get("head_dim") is None and hidden % num_heads:
            raise ModelLoadError(
                f"{source}: hidden_size={hidden} is not a multiple of "
                f"num_attention_heads={num_heads}, and there is no head_dim to say the head size"
            )
        head_dim = _positive_int(raw, "head_dim", source, default=hidden // num_heads)
        if head_dim > SHAPE_LIMITS["head_dim"]:  # the default hidden_size / num_attention_heads
            raise ModelLoadError(
                f"{source}: hidden_size / num_attention_heads = {head_dim} is a head size above "
                f"{SHAPE_LIMITS['head_dim']}; check hidden_size and num_attention_heads"
            )
        act = raw.get("hidden_act", "silu")
        if act != "silu":
            raise ModelLoadError(f"{source}: hidden_act={act!r} is not supported (only 'silu')")

        rope_theta, rope_scaling = _read_rope(raw, source)
        is_qwen2 = arch == "Qwen2ForCausalLM"
        is_llama = arch == "LlamaForCausalLM"
        attention_bias = bool(raw.get("attention_bias", False)) and is_llama

        dtype = str(raw.get("torch_dtype") or raw.get("dtype") or "float32")
        if dtype not in ("float32", "bfloat16", "float16"):
            raise ModelLoadError(f"{source}: dtype {dtype!r} is not supported")
        return cls(
            architecture=arch,
            vocab_size=_positive_int(raw, "vocab_size", source),
            hidden_size=hidden,
            intermediate_size=_positive_int(raw, "intermediate_size", source),
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            num_key_value_heads=num_kv_heads,
            head_dim=head_dim,
            rms_norm_eps=_rms_norm_eps(raw, source),
            max_position_embeddings=_positive_int(
                raw, "max_position_embeddings", source, default=2048
            ),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qkv_bias=is_qwen2 or attention_bias,
            o_bias=attention_bias,
            mlp_bias=bool(raw.get("mlp_bias", False)) and is_llama,
            sliding_windows=_read_sliding_windows(raw, arch, num_layers, source),
            torch_dtype=dtype,
            bos_token_id=_bos_token_id(raw, source),
            eos_token_ids=_token_ids(raw.get("eos_token_id"), "eos_token_id", source),
        )

    def kv_element_dtype(self, kv_cache_dtype: str = "auto", dtype: str = "auto") -> str:
        """The KV pool's element type name: ``kv_cache_dtype`` ("int8" / "fp8"), else the model
        dtype ``dtype`` ("float32" / "bfloat16" / "float16"), else ("auto") the checkpoint's.

        Raises:
            ModelLoadError: a name with no known element size.
        """
        name = kv_cache_dtype if kv_cache_dtype != "auto" else dtype
        name = self.torch_dtype if name == "auto" else name
        if name not in DTYPE_BYTES:
            raise ModelLoadError(f"unknown KV cache dtype {name!r}")
        return name

    def kv_bytes_per_token(self, kv_cache_dtype: str = "auto", dtype: str = "auto") -> int:
        """KV cache bytes one token takes over all layers: 2 x layers x kv_heads x head_dim x bytes.

        The element type is ``kv_element_dtype(kv_cache_dtype, dtype)`` (the runner passes the
        pool's torch dtype name as ``kv_cache_dtype``). Per-head scales of quantised caches are a
        few bytes per layer and are not counted.
        """
        elem = DTYPE_BYTES[self.kv_element_dtype(kv_cache_dtype, dtype)]
        return 2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim * elem


def _read_architecture(raw: dict[str, Any], source: str) -> str:
    """The supported class named in ``architectures`` (a list, or a lone string), else the one
    ``model_type`` implies when ``architectures`` is absent or empty."""
    archs = raw.get("architectures")
    if isinstance(archs, str):  # a lone name instead of a one-item list
        archs = [archs] if archs else []
    if archs is None:
        archs = []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ModelLoadError(
            f"{source}: architectures must be a list of class names such as "
            f'["LlamaForCausalLM"], got {archs!r}'
        )
    arch: str | None
    if archs:
        arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
        shown: object = archs
    else:
        model_type = raw.get("model_type")
        arch = _ARCH_BY_MODEL_TYPE.get(model_type) if isinstance(model_type, str) else None
        shown = model_type
    if arch is None:
        raise ModelLoadError(
            f"{source}: architecture {shown!r} is not supported; "
            f"the engine runs {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    return arch


def _get(raw: dict[str, Any], key: str, default: object) -> object:
    """``raw[key]``, or ``default`` when the key is absent or null."""
    value = raw.get(key)
    return default if value is None else value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(
    raw: dict[str, Any],
    key: str,
    source: str,
    default: int | None = None,
    *,
    name: str | None = None,
) -> int:
    """``raw[key]`` as an integer from 1 to ``SHAPE_LIMITS[key]``; ``default`` when absent or null
    (None: required). ``name`` is the field as the message shows it (default: ``key``)."""
    name = name or key
    value = raw.get(key)
    if value is None:
        if default is None:
            raise ModelLoadError(f"{source}: required field {name!r} is missing")
        return default
    maximum = SHAPE_LIMITS[key]
    if not _is_int(value) or not 1 <= value <= maximum:
        raise ModelLoadError(
            f"{source}: {name} must be a positive integer at most {maximum}, got {_show(value)}"
        )
    return int(value)


def _show(value: object) -> str:
    """``repr(value)``, cut to 80 characters (a 4000-digit integer stays a one-line message)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _rms_norm_eps(raw: dict[str, Any], source: str) -> float:
    """``rms_norm_eps``: a finite number in (0, MAX_RMS_NORM_EPS); 1e-6 when absent."""
    value = _get(raw, "rms_norm_eps", 1e-6)
    # No integer lies in (0, 1), so only a float can pass (NaN fails both comparisons).
    if isinstance(value, float) and 0 < value < MAX_RMS_NORM_EPS:
        return value
    raise ModelLoadError(
        f"{source}: rms_norm_eps must be a number above 0 and below {MAX_RMS_NORM_EPS:g} "
        f"(checkpoints use 1e-6 or 1e-5), got {_show(value)}"
    )


def _number(value: object, key: str, source: str, *, positive: bool = False) -> float:
    """A finite JSON number (``positive``: also > 0) as a float."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range (10**400)
            number = math.inf
        if math.isfinite(number) and (number > 0 or not positive):
            return number
    kind = "a positive number" if positive else "a number"
    raise ModelLoadError(f"{source}: {key} must be {kind}, got {_show(value)}")


def _token_ids(value: object, key: str, source: str) -> tuple[int, ...]:
    """A token id or a list of them (None: none) as a tuple of non-negative ints."""
    if value is None:
        return ()
    items: list[object] = value if isinstance(value, list) else [value]
    ids = tuple(i for i in items if isinstance(i, int) and not isinstance(i, bool) and i >= 0)
    if len(ids) != len(items):
        raise ModelLoadError(
            f"{source}: {key} must be a token id (an integer >= 0) or a list of them, got {value!r}"
        )
    return ids


def _bos_token_id(raw: dict[str, Any], source: str) -> int | None:
    """``bos_token_id``: one id (or, in a few configs, a list whose first id is used), or None."""
    ids = _token_ids(raw.get("bos_token_id"), "bos_token_id", source)
    return ids[0] if ids else None


def _read_rope(raw: dict[str, Any], source: str) -> tuple[float, dict[str, Any] | None]:
    """Return (rope_theta, scaling dict with a ``rope_type`` key or None) for either dialect."""
    params = raw.get("rope_parameters")
    if isinstance(params, dict) and "rope_theta" in params:  # transformers 5.x
        theta = _number(params["rope_theta"], "rope_parameters.rope_theta", source, positive=True)
        scaling: dict[str, Any] | None = dict(params)
    else:  # transformers 4.x
        theta = _number(_get(raw, "rope_theta", 10000.0), "rope_theta", source, positive=True)
        rope_scaling = raw.get("rope_scaling")
        if rope_scaling and not isinstance(rope_scaling, dict):
            raise ModelLoadError(
                f"{source}: rope_scaling must be an object or null, got {rope_scaling!r}"
            )
        scaling = dict(rope_scaling) if rope_scaling else None
    if scaling is None:
        return theta, None
    rope_type = scaling.pop("rope_type", None) or scaling.pop("type", None) or "default"
    scaling.pop("type", None)
    scaling.pop("rope_theta", None)
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ModelLoadError(
            f"{source}: rope_type {rope_type!r} is not supported; "
            f"supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
        )
    partial = scaling.get("partial_rotary_factor", 1.0)
    if _number(partial, "partial_rotary_factor", source) != 1.0:
        raise ModelLoadError(f"{source}: partial_rotary_factor != 1 is not supported")
    if rope_type == "default":
        return theta, None
    _check_rope_parameters(rope_type, scaling, source)
    return theta, {"rope_type": rope_type, **scaling}


def _check_rope_parameters(rope_type: str, scaling: dict[str, Any], source: str) -> None:
    """Refuse a scaled rope_type whose parameters are missing, not finite or out of range, so
    that ``kv-size`` and ``serve`` both report it before the RoPE tables are built."""
    missing = [key for key in _ROPE_REQUIRED_KEYS[rope_type] if scaling.get(key) is None]
    if missing:
        raise ModelLoadError(
            f"{source}: rope_type {rope_type!r} needs {', '.join(map(repr, missing))} in "
            "rope_scaling; add them (see the model card) or remove rope_scaling"
        )

    def factor(key: str, minimum: float) -> float:
        """``scaling[key]`` as a float in [minimum, MAX_ROPE_FACTOR] (minimum 0: exclusive)."""
        value = scaling[key]
        number = math.nan
        if _is_int(value) and abs(value) <= MAX_ROPE_FACTOR:  # float(10**400) would overflow
            number = float(value)
        elif isinstance(value, float):
            number = value
        if number <= MAX_ROPE_FACTOR and (number >= minimum if minimum else number > 0):
            return number  # NaN fails every comparison
        low = f"from {minimum:g}" if minimum else "above 0 and"
        raise ModelLoadError(
            f"{source}: rope_scaling {key} must be a number {low} up to {MAX_ROPE_FACTOR:g}, "
            f"got {_show(value)}"
        )

    factor("factor", 1.0)
    if rope_type == "llama3":
        low, high = factor("low_freq_factor", 0.0), factor("high_freq_factor", 0.0)
        if high <= low:
            raise ModelLoadError(
                f"{source}: rope_scaling high_freq_factor ({high:g}) must be larger than "
                f"low_freq_factor ({low:g})"
            )
        _positive_int(
            scaling,
            "original_max_position_embeddings",
            source,
            name="rope_scaling original_max_position_embeddings",
        )


def _read_sliding_windows(
    raw: dict[str, Any], arch: str, num_layers: int, source: str
) -> tuple[int | None, ...]:
    """Per-layer attention window, following each architecture's transformers semantics.

    Mistral: ``sliding_window`` (if set) applies to every layer. Qwen2: only when
    ``use_sliding_window`` is true, and then to layers marked "sliding_attention" in
    ``layer_types`` (or, in old configs, layers >= ``max_window_layers``). Llama: never.
    """
    if not raw.get("sliding_window"):
        return tuple([None] * num_layers)
    if arch == "MistralForCausalLM":
        window = _positive_int(raw, "sliding_window", source)
        return tuple([window] * num_layers)
    if arch == "Qwen2ForCausalLM" and raw.get("use_sliding_window"):
        window = _positive_int(raw, "sliding_window", source)
        layer_types = raw.get("layer_types")
        if isinstance(layer_types, list) and len(layer_types) == num_layers:
            return tuple(window if t == "sliding_attention" else None for t in layer_types)
        first = raw.get("max_window_layers") or 0
        if not _is_int(first) or first < 0:
            raise ModelLoadError(
                f"{source}: max_window_layers must be an integer >= 0, got {first!r}"
            )
        return tuple(window if i >= first else None for i in range(num_layers))
    return tuple([None] * num_layers)


def read_generation_eos_ids(model_dir: str | Path) -> tuple[int, ...]:
    """EOS ids from ``generation_config.json`` (what transformers' ``generate`` stops on).

    Instruct checkpoints often list extra end-of-turn ids there (Llama 3: ``<|eot_id|>``).
    Returns () when the file is absent or has no ``eos_token_id``.
    """
    path = Path(model_dir) / "generation_config.json"
    if not path.is_file():
        return ()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: not JSON, not UTF-8
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc
    eos = raw.get("eos_token_id") if isinstance(raw, dict) else None
    return _token_ids(eos, "eos_token_id", str(path))
