"""Which checkpoint the demo serves: an explicit choice, the bundled test model, or the Hub.

Order (first match wins):

1. ``--model PATH|HUB_ID``;
2. ``$PROMPTCACHE_MODEL`` (same forms);
3. ``../shared/models/tinystories-656k`` beside the repository root, then the same path
   relative to the current directory;
4. the Hugging Face Hub id ``raincandy-u/TinyStories-656K`` (2.7 MB): from the local Hub cache,
   else downloaded when the machine is online.

A Hub id is always resolved to a local directory here, before any server starts, so a missing
network fails at once with a message that says how to give a model. The demo never serves
random weights.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from promptcache.errors import ConfigError

__all__ = ["DEFAULT_HUB_ID", "ENV_VAR", "ModelChoice", "has_chat_template", "resolve_model"]

ENV_VAR = "PROMPTCACHE_MODEL"
DEFAULT_HUB_ID = "raincandy-u/TinyStories-656K"
BUNDLED_RELATIVE = Path("..") / "shared" / "models" / "tinystories-656k"
#: Files the engine needs from a Hub repository (config, tokenizer, weights).
HUB_FILES = ("*.json", "*.safetensors", "*.jinja", "tokenizer.model")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

HOW_TO_GIVE_A_MODEL = (
    "give the demo a model: `promptcache demo --model PATH` (a directory with config.json, "
    "tokenizer.json and *.safetensors of a Llama, Qwen2 or Mistral model), or set "
    f"{ENV_VAR}=PATH, or place the test checkpoint at ../shared/models/tinystories-656k beside "
    f"the repository, or go online once so the demo can fetch {DEFAULT_HUB_ID} (2.7 MB)"
)


@dataclass(frozen=True)
class ModelChoice:
    """The checkpoint to serve.

    Attributes:
        path: local checkpoint directory (config.json, tokenizer, safetensors).
        name: the model name clients send (the directory name, lower-cased).
        source: how it was chosen, in words ("--model", "$PROMPTCACHE_MODEL", ...).
    """

    path: Path
    name: str
    source: str


def _choice(path: Path, source: str) -> ModelChoice:
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
    if path.is_dir():
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
    raise ConfigError(f"{source} {value!r} is not a directory; " + HOW_TO_GIVE_A_MODEL)


def resolve_model(
    option: str | None,
    *,
    repo_root: Path,
    cwd: Path | None = None,
    environ: dict[str, str] | None = None,
    allow_download: bool = True,
) -> ModelChoice:
    """Pick the checkpoint as described in the module docstring.

    Args:
        option: the ``--model`` value, or None.
        repo_root: the promptcache repository root (``../shared`` is looked up beside it).
        cwd: current directory for the second ``../shared`` lookup (default: ``Path.cwd()``).
        environ: environment to read ``PROMPTCACHE_MODEL`` from (default: ``os.environ``).
        allow_download: try the Hub over the network when the id is not cached locally.

    Raises:
        ConfigError: an explicit choice is not a checkpoint, or nothing was found; the message
            lists every way to give a model.
    """
    env = os.environ if environ is None else environ
    if option:
        return _explicit(option, "--model", allow_download=allow_download)
    if env.get(ENV_VAR):
        return _explicit(env[ENV_VAR], f"${ENV_VAR}", allow_download=allow_download)
    for base in (repo_root, cwd if cwd is not None else Path.cwd()):
        candidate = base / BUNDLED_RELATIVE
        if (candidate / "config.json").is_file():
            return _choice(candidate, "the test checkpoint in ../shared/models")
    found = _from_hub(
        DEFAULT_HUB_ID, "the default, from the Hugging Face Hub", allow_download=allow_download
    )
    if found is not None:
        return found
    raise ConfigError("no model found; " + HOW_TO_GIVE_A_MODEL)


def has_chat_template(model_dir: Path) -> bool:
    """True if the checkpoint ships a chat template (tokenizer_config.json or a .jinja file)."""
    if (model_dir / "chat_template.jinja").is_file():
        return True
    config = model_dir / "tokenizer_config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(isinstance(data, dict) and data.get("chat_template"))
