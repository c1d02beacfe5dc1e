"""What a disk tier's blocks depend on, hashed into the name of their directory.

A block's bytes are only valid for the engine that wrote them: the same weights, the same KV
element type (and, for int8 / fp8, the same scales), the same block size and token hashing,
and the same arithmetic (model dtype, weight quantisation, forward path, device type). Every
one of these goes into `TierKey`; its digest names the directory, so an engine that differs
in any of them never reads another's blocks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["TierKey", "model_files_digest"]

_CHUNK = 1 << 20


def model_files_digest(model_path: str | Path) -> str:
    """SHA-256 (hex) of the files that decide the model's K/V: the weights and config.json.

    Args:
        model_path: a checkpoint directory (``config.json``, ``*.safetensors``,
            ``model.safetensors.index.json``) or a ``.gguf`` file.

    Returns:
        64 hex characters; each file's name and size enter the hash before its bytes.

    Raises:
        OSError: a file cannot be read.
    """
    path = Path(model_path)
    if path.is_file():
        files = [path]
    else:
        files = sorted(
            p
            for p in path.iterdir()
            if p.is_file()
            and (
                p.suffix == ".safetensors"
                or p.name in ("config.json", "model.safetensors.index.json")
            )
        )
    h = hashlib.sha256()
    for file in files:
        h.update(f"{file.name}\0{file.stat().st_size}\0".encode())
        with file.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class TierKey:
    """Everything a stored block's meaning depends on.

    Attributes:
        model_digest: `model_files_digest` of the checkpoint.
        kv_dtype: the pool's element type (``float32``, ``int8``, ``float8_e4m3fn``...).
        kv_scales_digest: SHA-256 of the int8 / fp8 per-head scales ("" for a float pool).
        block_size: tokens per block.
        block_hash_version: `promptcache.engine.block_manager.BLOCK_HASH_VERSION`.
        block_shape: ``[num_layers, 2, block_size, num_kv_heads, head_dim]``.
        compute: what produced the values: model dtype, weight dtype, forward path, device type.
    """

    model_digest: str
    kv_dtype: str
    kv_scales_digest: str
    block_size: int
    block_hash_version: int
    block_shape: tuple[int, ...]
    compute: str

    def digest(self) -> str:
        """First 32 hex characters of the SHA-256 of the key's canonical JSON."""
        raw = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(raw).hexdigest()[:32]

    def as_json(self) -> dict[str, object]:
        """The key as a JSON object (written next to the blocks as ``key.json``)."""
        data = asdict(self)
        data["block_shape"] = list(self.block_shape)
        return data
