"""`KVTiers`: the block manager's lower cache tiers (host RAM, then disk) over the KV pool.

Demotion: when the block manager evicts a cached pool block (ref_count 0, least recently
used; `BlockManager._pop_free`), `block_evicted` gives it a RAM slot at once and queues the copy;
`flush_demotions` copies every queued block in one indexed copy per layer. The runner calls it
first thing in each step, before the step's swaps, copy-on-writes, loads and forward pass, the
only writes into the pool: an evicted block still holds its bytes until then. A full RAM tier
first moves its least recently used block to the disk tier (or drops it when there is none),
after flushing the queue, so the block it writes out holds its bytes. With no RAM tier, evicted
blocks go straight to disk, one at a time.

Promotion: `BlockManager.match_prefix` goes on in the tiers after a pool miss
(`lookup`, which checks the hash, the parent hash and the tokens, like the pool's collision
guard). Before admission the scheduler calls `prepare` on each hit: a disk block is read and
its CRC checked there, and one that fails is deleted and ends the match, so its tokens are
computed again and it is never served. The block manager then gives each hit a fresh pool
block, registers it under its hash and `pin`s the tier entry; the runner calls `load` after
the step's swap-ins and before the forward pass, which copies the bytes up and unpins.

A disk block is read into a reused buffer (one file, one read, one CRC pass over it) and stays
there, staged, until the `load` of the step that admits its request, however many blocks the
match has. `load` copies each staged block straight from its buffer into its pool block: one
strided copy per block where the CPU pool's K and V tensors lie in one mapping
(`promptcache.engine.kv_pages`), else one gathered copy per layer. After each load at most
`MAX_STAGED_BLOCKS` blocks staged for requests not yet admitted stay staged.

Start-up: tiers built over a disk tier that holds blocks make their first hits' read buffers
and the pool blocks those hits will fill resident at once (`KVTiers.startup_seconds`), so a
restarted engine's first requests pay no page faults for them; it is part of the engine's
load, and ``engine serve`` prints it in its start-up banner.

The tiers are inclusive: a promoted block stays in its tier, so evicting it again costs no
copy. `flush` writes the pool's and RAM's cached blocks to disk (the engine calls it at
close), so a restarted engine with the same `TierKey` finds them.

Every copy is of the pool's own dtype, byte for byte (int8 / fp8 included): a block restored
from a tier is the block that was evicted.

KV events (`TierEventSink`, `promptcache.engine.kv_events.KVEventRecorder`): a block entering
or leaving the RAM tier is a ``BlockStored`` / ``BlockRemoved`` with ``medium`` "CPU", the name
vLLM's offloading connector publishes for its CPU tier (``vllm/v1/kv_offload/mediums.py``,
``CPULoadStoreSpec.medium()``, https://github.com/vllm-project/vllm, checked 2026-12-03); the
disk tier uses "DISK", our own name (vLLM has no disk medium). Pool events keep "GPU".
"""

from __future__ import annotations

import logging
import mmap
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from .disk_tier import DiskTier
from .host_tier import HostTier

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..attention.base import KVCacheLayer

__all__ = ["MAX_STAGED_BLOCKS", "MEDIUM_CPU", "MEDIUM_DISK", "KVTiers", "TierEventSink"]

MEDIUM_CPU = "CPU"
"""``medium`` of the RAM tier's KV events (vLLM's name for its CPU offloading tier)."""

MEDIUM_DISK = "DISK"
"""``medium`` of the disk tier's KV events (our own name)."""

MAX_STAGED_BLOCKS = 64
"""Disk blocks read and checked for a request that was then not admitted in that step are
kept for a later step, up to this many; older ones are read again when needed. Also the most
read buffers, staged and free together, kept between loads, and the number made ready when a
disk tier that holds blocks opens."""


_INT_OF_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _np(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor as a numpy array of same-size integers (shares memory; bf16 and float8,
    which numpy lacks, included)."""
    return tensor.view(_INT_OF_SIZE[tensor.element_size()]).numpy()


def _copyable(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, or a uint8 view of it for float8 (torch implements no index copy for it)."""
    if tensor.element_size() == 1 and tensor.is_floating_point():
        return tensor.view(torch.uint8)
    return tensor


def _make_resident(kv_caches: Sequence[KVCacheLayer], num_blocks: int) -> None:
    """Write every memory page of pool blocks ``[0, num_blocks)`` of each layer's K and V with
    the byte it holds (contents unchanged), so a lazily mapped CPU pool has them resident.
    Nothing on other devices."""
    if kv_caches[0].k_cache.device.type != "cpu" or num_blocks < 1:
        return
    for layer in kv_caches:
        for cache in (layer.k_cache, layer.v_cache):
            flat = _np(cache[:num_blocks]).reshape(-1).view(np.uint8)
            # One byte in each page (and the last byte, in a page the stride may skip).
            picked = flat[:: mmap.PAGESIZE]
            picked[:] = picked.copy()
            flat[-1:] = flat[-1:].copy()


def _pool_blocks_view(kv_caches: Sequence[KVCacheLayer]) -> np.ndarray | None:
    """See `KVTiers._pool_blocks`."""
    first = kv_caches[0].k_cache
    if first.device.type != "cpu" or not first.is_contiguous():
        return None
    tensors = [t for layer in kv_caches for t in (layer.k_cache, layer.v_cache)]
    step = first.numel() * first.element_size()
    base = first.data_ptr()
    storage = first.untyped_storage()
    for i, tensor in enumerate(tensors):
        if (
            tensor.dtype != first.dtype
            or tensor.shape != first.shape
            or not tensor.is_contiguous()
            or tensor.data_ptr() != base + i * step
            or tensor.untyped_storage().data_ptr() != storage.data_ptr()
        ):
            return None
    if first.storage_offset() * first.element_size() + len(tensors) * step > storage.nbytes():
        return None
    numel = first.numel()
    shape = (len(kv_caches), 2, *first.shape)
    strides = (2 * numel, numel, *first.stride())
    view = torch.as_strided(first, shape, strides, first.storage_offset())
    return _np(view)


class TierEventSink(Protocol):
    """Receives the tiers' changes (`promptcache.engine.kv_events.KVEventRecorder`)."""

    def block_stored(
        self,
        block_hash: int,
        parent_hash: int | None,
        token_ids: tuple[int, ...],
        medium: str | None = ...,
    ) -> None:
        """A block entered the tier named by `medium`."""

    def block_removed(self, block_hash: int, medium: str | None = ...) -> None:
        """A block left the tier named by `medium`."""


class KVTiers:
    """Host-RAM and disk tiers under one KV pool (`BlockTierStore` of the block manager).

    Args:
        kv_caches: the pool, one ``KVCacheLayer`` per layer (``[num_blocks, block_size,
            num_kv_heads, head_dim]`` K and V).
        host: the RAM tier, or None.
        disk: the disk tier, or None.

    Not thread-safe: the engine thread calls everything.
    """

    def __init__(
        self,
        kv_caches: Sequence[KVCacheLayer],
        host: HostTier | None,
        disk: DiskTier | None,
    ) -> None:
        if host is None and disk is None:
            raise ValueError("KVTiers needs a RAM tier, a disk tier or both")
        self.kv_caches = list(kv_caches)
        self.host = host
        self.disk = disk
        #: Where tier changes are reported, or None.
        self.event_sink: TierEventSink | None = None
        self._pinned: set[int] = set()
        self._demotions: list[tuple[int, int]] = []  # (pool block, RAM slot) not yet copied
        # Disk blocks read and checked, waiting for `load`: hash -> (read buffer, payload view
        # of it). Buffers are reused (`_buffers`), so a read pays no page faults.
        self._staged: OrderedDict[int, tuple[np.ndarray, torch.Tensor]] = OrderedDict()
        self._buffers: list[np.ndarray] = []
        self._pool_view: np.ndarray | None = None
        self._pool_view_known = False  # whether `_pool_view` was looked for
        #: Blocks the last `flush` could not write to disk (disk full...): the disk tier's
        #: ``last_write_error`` says why.
        self.flush_failures = 0
        # whether the disk refused the last block written while serving (warned once per run
        # of refusals), and whether `flush` is writing (its failures are counted instead)
        self._disk_refusing = False
        self._flushing = False
        #: Pool blocks made resident when the tiers were built (`startup_seconds`).
        self.num_resident_blocks = 0
        #: Disk read buffers made resident then (at most ``MAX_STAGED_BLOCKS``).
        self.num_resident_buffers = 0
        #: Wall seconds of the start-up work: with a disk tier that holds blocks, the read
        #: buffers its first hits use and the pool blocks they are copied into (the first
        #: ``min(disk blocks, pool blocks)``, which a fresh block manager hands out first) are
        #: made resident here, so the restarted engine's first requests pay no page faults for
        #: them. A lazily mapped pool (`promptcache.engine.kv_pages`) otherwise pays a fault per
        #: page on its first write.
        self.startup_seconds = 0.0
        if disk is not None and len(disk):
            start = time.perf_counter()
            count = min(MAX_STAGED_BLOCKS, len(disk))
            self._buffers = [disk.new_buffer() for _ in range(count)]
            self.num_resident_buffers = count
            num_pool_blocks = self.kv_caches[0].k_cache.shape[0]
            self.num_resident_blocks = min(len(disk), num_pool_blocks)
            _make_resident(self.kv_caches, self.num_resident_blocks)
            self.startup_seconds = time.perf_counter() - start
        #: Blocks copied down from the pool (a count).
        self.num_demoted = 0
        #: Blocks moved from RAM to disk (a count).
        self.num_spilled = 0
        #: Blocks copied up into the pool (a count).
        self.num_loaded = 0
        #: Cumulative wall seconds of the tiers' own work on the engine thread: "demote" (pool
        #: to RAM copies), "write" (disk writes), "read" (disk reads and CRC checks), "load"
        #: (copies up into the pool).
        self.seconds = {"demote": 0.0, "write": 0.0, "read": 0.0, "load": 0.0}

    # BlockTierStore ---------------------------------------------------------------------------

    def block_evicted(
        self, block_id: int, block_hash: int, parent_hash: int, token_ids: tuple[int, ...]
    ) -> None:
        """Copy pool block `block_id` down (RAM if there is one, else disk)."""
        if block_hash in self._pinned:
            return  # being promoted: its tier copy is the source, and stays
        host, disk = self.host, self.disk
        if host is not None:
            if block_hash in host:
                host.touch(block_hash)
                return
            if host.is_full and not self._evict_host():
                return  # every slot is pinned by this step's promotions
            slot = host.add(block_hash, parent_hash, token_ids)
            self._demotions.append((block_id, slot))
            self.num_demoted += 1
            self._stored(block_hash, parent_hash, token_ids, MEDIUM_CPU)
        elif disk is not None:
            if block_hash in disk:
                disk.touch(block_hash)
                return
            data = self._gather(block_id)
            self._disk_write(block_hash, parent_hash, token_ids, data)
            self.num_demoted += 1

    def lookup(self, block_hash: int, parent_hash: int, token_ids: tuple[int, ...]) -> str | None:
        """ "ram" or "disk" when that tier holds this exact block, else None."""
        if self.host is not None:
            entry = self.host.get(block_hash)
            if entry is not None:
                if entry.parent_hash == parent_hash and entry.token_ids == token_ids:
                    return "ram"
                return None
        if self.disk is not None:
            d = self.disk.get(block_hash)
            if d is not None and d.parent_hash == parent_hash and d.token_ids == token_ids:
                return "disk"
        return None

    def contains(self, block_hash: int) -> bool:
        """Whether a tier holds `block_hash`."""
        return (self.host is not None and block_hash in self.host) or (
            self.disk is not None and block_hash in self.disk
        )

    def prepare(self, block_hash: int) -> bool:
        """Ready a hit for `load`: RAM blocks are ready; a disk block is read and checked.

        Returns False (and the block is gone from disk) when the file fails its checks.
        """
        if (self.host is not None and block_hash in self.host) or block_hash in self._staged:
            return True
        if self.disk is None or block_hash not in self.disk:
            return False
        start = time.perf_counter()
        buffer = self._buffers.pop() if self._buffers else self.disk.new_buffer()
        data = self.disk.read(block_hash, buffer)
        if data is None:
            self._release(buffer)
        else:
            # Kept until `load` (which trims what a request left unadmitted): a long match's
            # blocks all stay staged until the step that admits it loads them.
            self._staged[block_hash] = (buffer, data)
        self.seconds["read"] += time.perf_counter() - start
        if data is None:
            logger.warning(
                "dropped the KV block file %s (%s); its tokens are computed again",
                self.disk.path(block_hash),
                self.disk.last_read_error,
            )
            self._removed(block_hash, MEDIUM_DISK)
            return False
        return True

    def pin(self, block_hash: int) -> None:
        """Keep the entry and its bytes until the next `load`."""
        self._pinned.add(block_hash)

    # Runner -----------------------------------------------------------------------------------

    def flush_demotions(self) -> None:
        """Copy every queued demotion from the pool into its RAM slot (one indexed copy per
        layer for K and for V). Call before anything writes into the pool."""
        if not self._demotions:
            return
        start = time.perf_counter()
        host = self.host
        assert host is not None
        blocks = [b for b, _ in self._demotions]
        slots = [s for _, s in self._demotions]
        self._demotions = []
        if self.kv_caches[0].k_cache.device.type == "cpu":
            # numpy's fancy indexing: single-threaded row copies. torch's index ops split each
            # copy over its OpenMP threads, which costs 3x more on a busy 2-core machine.
            storage = _np(host.storage)
            pool = self._pool_blocks()
            if pool is not None:  # one strided copy per block (see load)
                for block_id, slot in zip(blocks, slots, strict=True):
                    storage[:, :, slot] = pool[:, :, block_id]
            else:
                ids, rows = np.asarray(blocks), np.asarray(slots)
                for layer_index, layer in enumerate(self.kv_caches):
                    for kv, cache in enumerate((layer.k_cache, layer.v_cache)):
                        storage[layer_index, kv, rows] = _np(cache)[ids]
        else:
            device = self.kv_caches[0].k_cache.device
            dev_ids, host_rows = torch.tensor(blocks, device=device), torch.tensor(slots)
            tensor = _copyable(host.storage)
            for layer_index, layer in enumerate(self.kv_caches):
                for kv, cache in enumerate((layer.k_cache, layer.v_cache)):
                    picked = _copyable(cache).index_select(0, dev_ids).to("cpu")
                    tensor[layer_index, kv].index_copy_(0, host_rows, picked)
        self.seconds["demote"] += time.perf_counter() - start

    def load(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Copy tier blocks into the pool: ``pairs`` of (block hash, pool block id).

        Call after the step's swap-ins, before the forward pass. Unpins every entry.

        Raises:
            RuntimeError: a hash that was not prepared (a bug in the caller).
        """
        try:
            self.flush_demotions()
            if not pairs:
                return
            start = time.perf_counter()
            parts: list[torch.Tensor] = []
            host_slots: list[int] = []
            order: list[int] = []  # pool ids in the order of the stacked sources
            staged_dst: list[int] = []
            used: list[np.ndarray] = []  # staged buffers, reusable after the copy
            for block_hash, block_id in pairs:
                staged_entry = self._staged.pop(block_hash, None)
                if staged_entry is not None:
                    used.append(staged_entry[0])
                    parts.append(staged_entry[1])
                    staged_dst.append(block_id)
                    continue
                entry = self.host.get(block_hash) if self.host is not None else None
                if entry is None:
                    raise RuntimeError(f"block {block_hash:032x} was not prepared for loading")
                host_slots.append(entry.slot)
                order.append(block_id)
                assert self.host is not None
                self.host.touch(block_hash)
            # Copies move elements bit for bit (through integer views), so the pool gets the
            # tier's bytes exactly.
            dst_ids = order + staged_dst
            device = self.kv_caches[0].k_cache.device
            if device.type == "cpu":  # numpy: see flush_demotions
                pool = self._pool_blocks()
                if pool is not None:
                    # Each block straight into its pool block, from its RAM slot or its read
                    # buffer: one strided copy per block, no gathered temporary (about 1.4x
                    # faster than gathering each layer's rows, then scattering them).
                    if host_slots:
                        assert self.host is not None
                        slots = _np(self.host.storage)
                        for slot, block_id in zip(host_slots, order, strict=True):
                            pool[:, :, block_id] = slots[:, :, slot]
                    for part, block_id in zip(parts, staged_dst, strict=True):
                        pool[:, :, block_id] = _np(part)
                else:
                    self._load_by_layer(host_slots, parts, dst_ids)
            else:
                tensors: list[torch.Tensor] = []
                if host_slots:
                    assert self.host is not None
                    host_tensor = _copyable(self.host.storage)
                    tensors.append(host_tensor.index_select(2, torch.tensor(host_slots)))
                if parts:
                    tensors.append(torch.stack([_copyable(p) for p in parts], dim=2))
                stacked = torch.cat(tensors, dim=2) if len(tensors) > 1 else tensors[0]
                stacked = stacked.to(device)
                dev_dst = torch.tensor(dst_ids, device=device)
                for layer_index, layer in enumerate(self.kv_caches):
                    for kv, cache in enumerate((layer.k_cache, layer.v_cache)):
                        _copyable(cache).index_copy_(0, dev_dst, stacked[layer_index, kv])
            parts.clear()
            for buffer in used:
                self._release(buffer)
            self.num_loaded += len(pairs)
            self.seconds["load"] += time.perf_counter() - start
        finally:
            self._pinned.clear()
            # Blocks staged for requests this step did not admit: the newest few stay.
            while len(self._staged) > MAX_STAGED_BLOCKS:
                _, (buffer, _) = self._staged.popitem(last=False)
                self._release(buffer)

    # Engine -----------------------------------------------------------------------------------

    def flush(self, pool_blocks: Iterable[tuple[int, int, int, tuple[int, ...]]]) -> int:
        """Write cached pool blocks and RAM blocks that the disk tier lacks to disk, and leave
        the disk tier's LRU order (file modification times, which a restarted tier reads) that
        of the blocks' last use: the RAM tier's blocks, which the pool evicted, least recently
        used first, then the pool's in its own order. A budget smaller than what the disk holds
        (or blocks the disk takes later) then deletes the blocks used longest ago, a chain's tail
        before its head, never a hot prefix's first block before the blocks that follow it.

        Args:
            pool_blocks: (block id, hash, parent hash, token ids) of the pool's cached blocks,
                least recently used first (`BlockManager.cached_blocks`).

        Returns:
            Blocks written (0 without a disk tier). Those that could not be written (disk full)
            are counted in ``flush_failures``.
        """
        self.flush_demotions()
        disk = self.disk
        if disk is None:
            return 0
        failures_before = disk.num_write_failures
        self._flushing = True
        try:
            written, order = self._flush_to(disk, pool_blocks)
        finally:
            self._flushing = False
        disk.mark_used_in_order(order)
        self.flush_failures = disk.num_write_failures - failures_before
        return written

    def _flush_to(
        self, disk: DiskTier, pool_blocks: Iterable[tuple[int, int, int, tuple[int, ...]]]
    ) -> tuple[int, list[int]]:
        """`flush`'s writes: (blocks written, every block flushed least recently used first)."""
        pool = list(pool_blocks)
        in_pool = {block_hash for _, block_hash, _, _ in pool}
        written = 0
        order: list[int] = []  # every block flushed, least recently used first
        if self.host is not None:
            for block_hash in self.host.lru_order():
                if block_hash in in_pool:
                    continue  # promoted: its recency is the pool block's
                if block_hash not in disk:
                    entry = self.host.entries[block_hash]
                    data = self.host.block(entry.slot)
                    self._disk_write(block_hash, entry.parent_hash, entry.token_ids, data)
                    written += block_hash in disk
                order.append(block_hash)
        for block_id, block_hash, parent_hash, token_ids in pool:
            if block_hash not in disk:
                self._disk_write(block_hash, parent_hash, token_ids, self._gather(block_id))
                written += block_hash in disk
            order.append(block_hash)
        return written, order

    def clear(self) -> None:
        """Drop every RAM block and delete every disk block."""
        self._demotions = []
        if self.host is not None:
            for block_hash in self.host.lru_order():
                self._removed(block_hash, MEDIUM_CPU)
            self.host.clear()
        if self.disk is not None:
            for block_hash in self.disk.clear():
                self._removed(block_hash, MEDIUM_DISK)
        for buffer, _ in self._staged.values():
            self._release(buffer)
        self._staged.clear()
        self._pinned.clear()

    @property
    def num_ram_blocks(self) -> int:
        """Blocks in the RAM tier."""
        return len(self.host) if self.host is not None else 0

    @property
    def num_disk_blocks(self) -> int:
        """Blocks in the disk tier."""
        return len(self.disk) if self.disk is not None else 0

    # Internals -------------------------------------------------------------------------------

    def _gather(self, block_id: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """Pool block `block_id` as ``[num_layers, 2, block_size, heads, head_dim]`` on the CPU."""
        if out is None:
            layer0 = self.kv_caches[0].k_cache
            out = torch.empty((len(self.kv_caches), 2, *layer0.shape[1:]), dtype=layer0.dtype)
        for i, layer in enumerate(self.kv_caches):
            out[i, 0].copy_(layer.k_cache[block_id])
            out[i, 1].copy_(layer.v_cache[block_id])
        return out

    def _load_by_layer(
        self, host_slots: list[int], parts: list[torch.Tensor], dst_ids: list[int]
    ) -> None:
        """`load`'s copy into a CPU pool of separate tensors: per layer, RAM slots
        ``host_slots`` then staged blocks ``parts`` into pool blocks ``dst_ids`` (in that
        order), one gathered copy for K and one for V. Each temporary is one layer's rows (a few
        MB at most): large temporaries would be fresh mappings, paying page faults each load."""
        dst = np.asarray(dst_ids)
        rows = np.asarray(host_slots)
        storage = _np(self.host.storage) if self.host is not None else None
        staged = [_np(p) for p in parts]
        for layer_index, layer in enumerate(self.kv_caches):
            for kv, cache in enumerate((layer.k_cache, layer.v_cache)):
                pieces = []
                if host_slots:
                    assert storage is not None
                    pieces.append(storage[layer_index, kv, rows])
                if staged:
                    pieces.append(np.stack([p[layer_index, kv] for p in staged]))
                src = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
                _np(cache)[dst] = src

    def _release(self, buffer: np.ndarray) -> None:
        """Keep a read buffer for the next disk read, while free and staged buffers together
        number fewer than `MAX_STAGED_BLOCKS` (the memory the tiers keep between loads)."""
        if len(self._buffers) + len(self._staged) < MAX_STAGED_BLOCKS:
            self._buffers.append(buffer)

    def _pool_blocks(self) -> np.ndarray | None:
        """The CPU pool as one ``[num_layers, 2, num_blocks, block_size, heads, head_dim]``
        integer array (a view, ``_np``), when its K and V tensors lie in one buffer, one after
        the other (layer 0's K, its V, layer 1's K...: `promptcache.engine.kv_pages`); else
        None. ``pool[:, :, b]`` is then block ``b`` in a tier block's own layout."""
        if not self._pool_view_known:
            self._pool_view = _pool_blocks_view(self.kv_caches)
            self._pool_view_known = True
        return self._pool_view

    def _evict_host(self) -> bool:
        """Move the least recently used unpinned RAM block to disk (or drop it)."""
        host = self.host
        assert host is not None
        self.flush_demotions()  # the block written out must hold its bytes
        for block_hash in host.lru_order():
            if block_hash in self._pinned:
                continue
            entry = host.entries[block_hash]
            if self.disk is not None and block_hash not in self.disk:
                data = host.block(entry.slot)
                self._disk_write(block_hash, entry.parent_hash, entry.token_ids, data)
                self.num_spilled += 1
            host.remove(block_hash)
            self._removed(block_hash, MEDIUM_CPU)
            return True
        return False

    def _disk_write(
        self, block_hash: int, parent_hash: int, token_ids: tuple[int, ...], data: torch.Tensor
    ) -> None:
        disk = self.disk
        assert disk is not None
        start = time.perf_counter()
        failures = disk.num_write_failures
        removed = disk.write(block_hash, parent_hash, token_ids, data, self._pinned)
        self.seconds["write"] += time.perf_counter() - start
        refused = disk.num_write_failures > failures
        if refused and not self._disk_refusing and not self._flushing:
            logger.warning(
                "could not write an evicted KV block to the disk tier %s (%s); blocks evicted "
                "while the disk refuses them are dropped, and a restart will not find them",
                disk.dir,
                disk.last_write_error,
            )
        self._disk_refusing = refused
        for gone in removed:
            staged = self._staged.pop(gone, None)
            if staged is not None:
                self._release(staged[0])
            self._removed(gone, MEDIUM_DISK)
        if block_hash in disk:
            self._stored(block_hash, parent_hash, token_ids, MEDIUM_DISK)

    def _stored(
        self, block_hash: int, parent_hash: int, token_ids: tuple[int, ...], medium: str
    ) -> None:
        if self.event_sink is not None:
            from ..block_manager import NONE_HASH

            parent = None if parent_hash == NONE_HASH else parent_hash
            self.event_sink.block_stored(block_hash, parent, token_ids, medium=medium)

    def _removed(self, block_hash: int, medium: str) -> None:
        if self.event_sink is not None:
            self.event_sink.block_removed(block_hash, medium=medium)
