"""`KVTiers`' copies on real pools, RAM slots and block files: blocks read into reused buffers
and copied into the pool, and blocks demoted to RAM and loaded back, keep their bytes (a pool
laid out as one mapping, copied block by block, and a pool of separate tensors, copied layer by
layer); a corrupt or grown file is refused; the start-up work makes pool pages resident without
changing a byte."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from promptcache.engine.attention.base import KVCacheLayer
from promptcache.engine.kv_pages import zeroed_pool
from promptcache.engine.kv_tiers import KVTiers
from promptcache.engine.kv_tiers.disk_tier import DiskTier
from promptcache.engine.kv_tiers.tier_key import TierKey
from promptcache.engine.kv_tiers.tiered_cache import MAX_STAGED_BLOCKS

LAYERS, BS, HEADS, DIM = 3, 4, 2, 8
SHAPE = (LAYERS, 2, BS, HEADS, DIM)


def _key() -> TierKey:
    return TierKey("model", "float32", "", BS, 1, SHAPE, "test")


def _disk(root: Path) -> DiskTier:
    return DiskTier(root, _key(), 2**30, SHAPE, torch.float32)


def _pool(num_blocks: int, mapped: bool) -> list[KVCacheLayer]:
    shape = (num_blocks, BS, HEADS, DIM)
    if mapped:
        return [
            KVCacheLayer(k, v)
            for k, v in zeroed_pool(LAYERS, shape, torch.float32, torch.device("cpu"))
        ]
    return [KVCacheLayer(torch.zeros(shape), torch.zeros(shape)) for _ in range(LAYERS)]


def _block_of(pool: list[KVCacheLayer], block_id: int) -> torch.Tensor:
    return torch.stack(
        [torch.stack((layer.k_cache[block_id], layer.v_cache[block_id])) for layer in pool]
    )


def _write_blocks(disk: DiskTier, count: int, seed: int) -> dict[int, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    blocks = {}
    for i in range(count):
        data = torch.randn(SHAPE, generator=gen)
        block_hash = (seed << 64) + i + 1
        disk.write(block_hash, 0, tuple(range(i, i + BS)), data)
        blocks[block_hash] = data
    return blocks


@pytest.mark.parametrize("mapped", [True, False], ids=["one-mapping", "separate-tensors"])
def test_disk_blocks_reach_the_pool_byte_for_byte(tmp_path: Path, mapped: bool) -> None:
    writer = _disk(tmp_path)
    first = _write_blocks(writer, 5, seed=1)
    second = _write_blocks(writer, 4, seed=2)
    pool = _pool(12, mapped)
    tiers = KVTiers(pool, None, _disk(tmp_path))  # reopened: the index comes from the files
    assert (tiers._pool_blocks() is not None) == mapped

    for block_hash in first:
        assert tiers.prepare(block_hash)
        tiers.pin(block_hash)
    tiers.load([(h, i) for i, h in enumerate(first)])
    # The same buffers now take other blocks: the first ones, in the pool, must not change.
    for block_hash in second:
        assert tiers.prepare(block_hash)
        tiers.pin(block_hash)
    tiers.load([(h, 11 - i) for i, h in enumerate(second)])

    for i, data in enumerate(first.values()):
        assert torch.equal(_block_of(pool, i).view(torch.int32), data.view(torch.int32))
    for i, data in enumerate(second.values()):
        assert torch.equal(_block_of(pool, 11 - i).view(torch.int32), data.view(torch.int32))
    assert torch.count_nonzero(_block_of(pool, 5)) == 0  # untouched blocks stay zero
    assert tiers.num_loaded == 9


def test_a_corrupt_block_is_refused_and_its_buffer_reused(tmp_path: Path) -> None:
    writer = _disk(tmp_path)
    blocks = _write_blocks(writer, 3, seed=3)
    bad, good, grown = list(blocks)
    raw = bytearray(writer.path(bad).read_bytes())
    raw[-1] ^= 0x01
    writer.path(bad).write_bytes(bytes(raw))
    with writer.path(grown).open("ab") as fh:
        fh.write(b"\0")  # one byte more: the size check, not only the CRC
    pool = _pool(4, mapped=True)
    tiers = KVTiers(pool, None, _disk(tmp_path))
    assert not tiers.prepare(bad)
    assert not tiers.prepare(grown)
    assert tiers.disk is not None and bad not in tiers.disk and grown not in tiers.disk
    assert not writer.path(bad).exists() and not writer.path(grown).exists()
    assert tiers.prepare(good)
    tiers.pin(good)
    tiers.load([(good, 2)])
    assert torch.equal(_block_of(pool, 2), blocks[good])
    assert tiers.disk.num_dropped == 2


def test_more_staged_blocks_than_the_limit_all_load(tmp_path: Path) -> None:
    """One match of more disk hits than `MAX_STAGED_BLOCKS`: every block stays staged until
    the load (none is read again), and afterwards at most the limit stays staged."""
    count = MAX_STAGED_BLOCKS + 6
    writer = _disk(tmp_path)
    blocks = _write_blocks(writer, count + 2, seed=4)
    hashes = list(blocks)
    pool = _pool(count, mapped=True)
    tiers = KVTiers(pool, None, _disk(tmp_path))
    for block_hash in hashes:  # two more than are loaded: a request left waiting
        assert tiers.prepare(block_hash)
    for block_hash in hashes[:count]:
        tiers.pin(block_hash)
    tiers.load([(h, i) for i, h in enumerate(hashes[:count])])
    for i, block_hash in enumerate(hashes[:count]):
        assert torch.equal(_block_of(pool, i), blocks[block_hash])
    assert list(tiers._staged) == hashes[count:]
    assert len(tiers._buffers) + len(tiers._staged) <= MAX_STAGED_BLOCKS


def _resident_pages(tensor: torch.Tensor) -> int:
    """Pages of `tensor`'s memory that are resident (mincore(2)); the tensor must start on a
    page boundary."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    nbytes = tensor.numel() * tensor.element_size()
    pages = -(-nbytes // mmap.PAGESIZE)
    vec = ctypes.create_string_buffer(pages)
    assert tensor.data_ptr() % mmap.PAGESIZE == 0
    assert libc.mincore(tensor.data_ptr(), nbytes, vec) == 0, ctypes.get_errno()
    return sum(b & 1 for b in vec.raw)


def _huge_pages_always() -> bool:
    """Whether Linux backs anonymous mappings with 2 MiB pages unasked (then a write makes far
    more than its 4 KiB page resident)."""
    path = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return path.exists() and "[always]" in path.read_text()


@pytest.mark.skipif(sys.platform != "linux", reason="mincore and the lazy pool are Linux's")
@pytest.mark.skipif(_huge_pages_always(), reason="transparent huge pages: residency by 2 MiB")
def test_startup_makes_the_first_pool_blocks_resident_without_changing_them(
    tmp_path: Path,
) -> None:
    # Blocks of 4 x 2 x 256 float32 = 8 KiB: two pages each.
    shape = (64, BS, HEADS, 256)
    pool = [
        KVCacheLayer(k, v)
        for k, v in zeroed_pool(LAYERS, shape, torch.float32, torch.device("cpu"))
    ]
    pool[0].k_cache[2, 1, 0, 5] = 7.0  # a value the start-up work must keep
    key = TierKey("model", "float32", "", BS, 1, (LAYERS, 2, BS, HEADS, 256), "test")
    before = [_resident_pages(t) for layer in pool for t in (layer.k_cache, layer.v_cache)]
    assert max(before) <= 2  # only the page written above
    KVTiers(pool, None, DiskTier(tmp_path / "other", key, 2**30, key.block_shape, torch.float32))
    assert [
        _resident_pages(t) for layer in pool for t in (layer.k_cache, layer.v_cache)
    ] == before  # an empty disk tier: nothing to do
    disk = DiskTier(tmp_path / "other", key, 2**30, key.block_shape, torch.float32)
    data = np.zeros(key.block_shape, np.float32)
    for i in range(6):
        disk.write(100 + i, 0, tuple(range(BS)), torch.from_numpy(data))
    tiers = KVTiers(
        pool, None, DiskTier(tmp_path / "other", key, 2**30, key.block_shape, torch.float32)
    )
    assert tiers.num_resident_blocks == 6
    for layer in pool:
        for cache in (layer.k_cache, layer.v_cache):
            assert _resident_pages(cache[:6]) == 12
            assert _resident_pages(cache[6:]) == 0
    assert pool[0].k_cache[2, 1, 0, 5] == 7.0
    assert torch.count_nonzero(torch.stack([layer.k_cache for layer in pool])) == 1


@pytest.mark.parametrize("mapped", [True, False], ids=["one-mapping", "separate-tensors"])
def test_ram_tier_round_trip_keeps_the_bytes(mapped: bool) -> None:
    from promptcache.engine.kv_tiers.host_tier import HostTier

    pool = _pool(8, mapped)
    gen = torch.Generator().manual_seed(6)
    for layer in pool:
        layer.k_cache.copy_(torch.randn(layer.k_cache.shape, generator=gen))
        layer.v_cache.copy_(torch.randn(layer.v_cache.shape, generator=gen))
    before = {b: _block_of(pool, b).clone() for b in range(8)}
    tiers = KVTiers(pool, HostTier(6, SHAPE, torch.float32), None)
    for b in (5, 1, 3):  # demoted in this order: slots are not the block order
        tiers.block_evicted(b, 1000 + b, 0, tuple(range(BS)))
    tiers.flush_demotions()
    for b in (5, 1, 3):
        assert tiers.host is not None
        slot = tiers.host.entries[1000 + b].slot
        assert torch.equal(tiers.host.block(slot), before[b])
    for block_hash in (1003, 1005, 1001):
        assert tiers.prepare(block_hash)
        tiers.pin(block_hash)
    tiers.load([(1003, 0), (1005, 7), (1001, 2)])
    assert torch.equal(_block_of(pool, 0), before[3])
    assert torch.equal(_block_of(pool, 7), before[5])
    assert torch.equal(_block_of(pool, 2), before[1])
    for b in (1, 3, 4, 5, 6):
        assert torch.equal(_block_of(pool, b), before[b])


def test_a_folder_or_fifo_named_like_a_block_file_is_left_alone(tmp_path: Path) -> None:
    disk = _disk(tmp_path)
    blocks = _write_blocks(disk, 2, seed=5)
    (disk.dir / "notes.tmp").mkdir()
    (disk.dir / "notes.tmp" / "kept").write_text("mine")
    (disk.dir / "old.kvb").mkdir()
    (disk.dir / "old.kvb" / "kept").write_text("mine too")
    os.mkfifo(disk.dir / f"{1:032x}.kvb")  # opening it to read would wait for a writer
    reopened = _disk(tmp_path)
    assert set(reopened.entries) == set(blocks)
    assert reopened.num_dropped == 0
    assert (disk.dir / "notes.tmp" / "kept").read_text() == "mine"
    assert (disk.dir / "old.kvb" / "kept").read_text() == "mine too"
    for block_hash, data in blocks.items():
        got = reopened.read(block_hash)
        assert got is not None and torch.equal(got, data)


def test_a_write_in_progress_by_a_live_engine_is_left_to_it(tmp_path: Path) -> None:
    """Two engines on one --kv-disk: one starting must not delete the other's ``.<pid>.tmp``
    (its write would then fail); a crashed writer's, a nameless one's and our own are removed."""
    import subprocess

    disk = _disk(tmp_path)
    _write_blocks(disk, 1, seed=6)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        live = disk.dir / f"{2:032x}.{other.pid}.tmp"
        dead = disk.dir / f"{3:032x}.{gone.pid}.tmp"
        mine = disk.dir / f"{4:032x}.{os.getpid()}.tmp"
        nameless = disk.dir / f"{5:032x}.tmp"
        for path in (live, dead, mine, nameless):
            path.write_bytes(b"partial")
        _disk(tmp_path)
        assert live.read_bytes() == b"partial"
        assert not dead.exists() and not mine.exists() and not nameless.exists()
    finally:
        other.kill()
        other.wait()


def test_the_blocks_deleted_at_open_are_counted(tmp_path: Path) -> None:
    """What opening a tier deleted is counted (the serve banner reports it): a damaged file,
    and the least recently used files over a budget smaller than the one they were written to."""
    disk = _disk(tmp_path)
    blocks = _write_blocks(disk, 3, seed=7)
    file_bytes = next(iter(disk.entries.values())).file_bytes
    (disk.dir / f"{9:032x}.kvb").write_bytes(b"not a block")
    assert (disk.num_dropped_at_open, disk.num_trimmed_at_open) == (0, 0)
    smaller = DiskTier(tmp_path, _key(), file_bytes, SHAPE, torch.float32)
    assert (smaller.num_dropped_at_open, smaller.num_trimmed_at_open) == (1, 2)
    assert len(smaller) == 1 and set(smaller.entries) < set(blocks)
    assert len(list(smaller.dir.glob("*.kvb"))) == 1
