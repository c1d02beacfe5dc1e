"""CPU time of the disk tier's work for one restored request: read, CRC-check, copy into the pool.

No model: blocks of SmolLM2-135M's shape (30 layers, K and V, 16 tokens, 3 KV heads of 64,
float32: 737,280 bytes) filled with random values are written to a disk tier in a temporary
directory. A `KVTiers` is then opened on it over a fresh 80-block KV pool (`zeroed_pool`,
mapped page by page on first write, as the engine's CPU pool), and each "request" prepares,
pins and loads 64 blocks it has not loaded before into pool blocks 0-63, as the engine does for
a 1,024-token prefix found on disk. Printed per request: CPU time of the engine thread
(`time.thread_time`, which other jobs on a shared machine move less than wall time) and wall
time; and the tiers' start-up work when they open (`KVTiers.startup_seconds`, where the code
has it). Uses only `prepare`, `pin` and `load`, so it also runs against older engine code.

Usage::

    .venv/bin/python benchmarks/engine_tier_copies.py            # ~5 s
    .venv/bin/python benchmarks/engine_tier_copies.py --requests 5
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

LAYERS, KV_HEADS, HEAD_DIM, BLOCK, POOL_BLOCKS, PER_REQUEST = 30, 3, 64, 16, 80, 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3, help="requests of 64 blocks (>= 1)")
    args = parser.parse_args()
    if args.requests < 1:
        parser.error(f"--requests must be at least 1, got {args.requests}")
    # Every request's 64 blocks are files in a temporary directory: refuse a count whose
    # files would not fit there, before writing any (a full disk fails other jobs too).
    needed = PER_REQUEST * args.requests * LAYERS * 2 * BLOCK * KV_HEADS * HEAD_DIM * 4
    free = shutil.disk_usage(tempfile.gettempdir()).free
    if needed > free:
        parser.error(
            f"--requests {args.requests} writes {needed / 2**30:.1f} GiB of block files to "
            f"{tempfile.gettempdir()}, which has {free / 2**30:.1f} GiB free: pass fewer requests"
        )

    import torch
    from engine_bench_model import machine

    from promptcache.engine.attention.base import KVCacheLayer
    from promptcache.engine.heap import unmap_large_allocations
    from promptcache.engine.kv_pages import zeroed_pool
    from promptcache.engine.kv_tiers import KVTiers
    from promptcache.engine.kv_tiers.disk_tier import DiskTier
    from promptcache.engine.kv_tiers.tier_key import TierKey

    torch.set_num_threads(1)
    unmap_large_allocations()  # as the engine's CPU runner does
    shape = (LAYERS, 2, BLOCK, KV_HEADS, HEAD_DIM)
    key = TierKey("benchmark", "float32", "", BLOCK, 1, shape, "benchmark")
    total = PER_REQUEST * args.requests
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="kv-tier-copies-") as tmp:
        writer = DiskTier(tmp, key, 2**40, shape, torch.float32)
        gen = torch.Generator().manual_seed(0)
        for i in range(total):
            writer.write(i + 1, 0, tuple(range(BLOCK)), torch.randn(shape, generator=gen))
        pool_shape = (POOL_BLOCKS, BLOCK, KV_HEADS, HEAD_DIM)
        pool = [
            KVCacheLayer(k, v)
            for k, v in zeroed_pool(LAYERS, pool_shape, torch.float32, torch.device("cpu"))
        ]
        cpu, wall = time.thread_time(), time.perf_counter()
        tiers = KVTiers(pool, None, DiskTier(tmp, key, 2**40, shape, torch.float32))
        startup = getattr(tiers, "startup_seconds", None)
        print(
            f"tiers opened on {total} block files: {(time.thread_time() - cpu) * 1000:.1f} ms CPU, "
            f"{(time.perf_counter() - wall) * 1000:.1f} ms wall"
            + ("" if startup is None else f" (start-up work {startup * 1000:.1f} ms)")
        )
        for r in range(args.requests):
            hashes = range(1 + PER_REQUEST * r, 1 + PER_REQUEST * (r + 1))
            cpu, wall = time.thread_time(), time.perf_counter()
            for block_hash in hashes:
                if not tiers.prepare(block_hash):
                    raise SystemExit(f"block {block_hash} failed its check")
                tiers.pin(block_hash)
            tiers.load([(h, i) for i, h in enumerate(hashes)])
            print(
                f"request {r}: {PER_REQUEST} blocks read, checked and copied into the pool in "
                f"{(time.thread_time() - cpu) * 1000:.1f} ms CPU, "
                f"{(time.perf_counter() - wall) * 1000:.1f} ms wall"
            )


if __name__ == "__main__":
    main()
