"""Cache tiers below the KV pool: host RAM, then disk, kept across restarts.

- `host_tier.HostTier`: a fixed number of block slots in host memory, LRU.
- `disk_tier.DiskTier`: a file per block under a directory keyed by `tier_key.TierKey`, a
  CRC-32 per block, LRU by access time, a byte budget.
- `tiered_cache.KVTiers`: the block manager's `BlockTierStore`. It demotes evicted pool blocks
  to RAM, RAM's LRU blocks to disk, and loads tier hits back into the pool.
"""

from __future__ import annotations

from .disk_tier import BLOCK_FILE_SUFFIX, DiskTier
from .host_tier import HostTier
from .tier_key import TierKey, model_files_digest
from .tiered_cache import MEDIUM_CPU, MEDIUM_DISK, KVTiers, TierEventSink

__all__ = [
    "BLOCK_FILE_SUFFIX",
    "MEDIUM_CPU",
    "MEDIUM_DISK",
    "DiskTier",
    "HostTier",
    "KVTiers",
    "TierEventSink",
    "TierKey",
    "model_files_digest",
]
