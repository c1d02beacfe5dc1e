"""Build an engine's `KVTiers` from its config and its model runner."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from promptcache.errors import ConfigError

from ..block_manager import BLOCK_HASH_VERSION
from .disk_tier import DiskTier
from .host_tier import HostTier
from .tier_key import TierKey, model_files_digest
from .tiered_cache import KVTiers

if TYPE_CHECKING:
    from ..config import EngineConfig
    from ..model_runner import ModelRunner

__all__ = ["build_kv_tiers", "tier_key_for"]


def tier_key_for(config: EngineConfig, runner: ModelRunner, model_path: str | Path) -> TierKey:
    """The `TierKey` of a loaded runner: what its blocks' bytes depend on.

    Raises:
        ConfigError: the model files cannot be read to hash them.
    """
    try:
        digest = model_files_digest(model_path)
    except OSError as exc:
        raise ConfigError(f"cannot hash the model files for the KV disk tier: {exc}") from None
    scales = hashlib.sha256()
    for layer in runner.kv_caches:
        for scale in (layer.k_scale, layer.v_scale):
            if scale is not None:
                scales.update(scale.detach().float().cpu().numpy().tobytes())
    quantised = runner.kv_caches[0].k_scale is not None
    path = "fused-cpu" if runner.fused_decode is not None else f"torch-{config.attention_backend}"
    compute = f"{runner.dtype}|weights={config.weight_dtype}|{path}|{runner.device.type}"
    return TierKey(
        model_digest=digest,
        kv_dtype=str(runner.kv_dtype).removeprefix("torch."),
        kv_scales_digest=scales.hexdigest() if quantised else "",
        block_size=config.block_size,
        block_hash_version=BLOCK_HASH_VERSION,
        block_shape=_block_shape(runner),
        compute=compute,
    )


def build_kv_tiers(config: EngineConfig, runner: ModelRunner, model_path: str | Path) -> KVTiers:
    """The RAM tier (``kv_ram_bytes``) and disk tier (``kv_disk_dir``) over `runner`'s pool.

    Raises:
        ConfigError: ``kv_ram_bytes`` holds no block, or the disk directory is unusable.
    """
    shape = _block_shape(runner)
    host = None
    if config.kv_ram_bytes:
        slots = config.kv_ram_bytes // runner.bytes_per_block
        if slots < 1:
            raise ConfigError(
                f"kv_ram_bytes={config.kv_ram_bytes} holds no KV block of "
                f"{runner.bytes_per_block} bytes; raise kv_ram_bytes (--kv-ram)"
            )
        host = HostTier(slots, shape, runner.kv_dtype)
    disk = None
    if config.kv_disk_dir is not None:
        key = tier_key_for(config, runner, model_path)
        disk = DiskTier(config.kv_disk_dir, key, config.kv_disk_bytes, shape, runner.kv_dtype)
    return KVTiers(runner.kv_caches, host, disk)


def _block_shape(runner: ModelRunner) -> tuple[int, ...]:
    k = runner.kv_caches[0].k_cache
    return (len(runner.kv_caches), 2, *k.shape[1:])
