"""Tiered KV cache: RAM tier demotion / promotion, disk tier across restarts, corrupt blocks,
KV events with their medium. Real tinystories engines; block counts are computed independently
from the prompt's token ids (`prefix_block_hashes`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from promptcache.engine import LLMEngine, SamplingParams
from promptcache.engine.block_manager import prefix_block_hashes
from promptcache.engine.kv_events import BlockRemoved, BlockStored
from promptcache.engine.kv_tiers import BLOCK_FILE_SUFFIX, MEDIUM_CPU, MEDIUM_DISK
from promptcache.engine.outputs import RequestOutput
from promptcache.errors import ConfigError

BS = 4
GREEDY = SamplingParams(temperature=0.0, max_tokens=10)
STORY_A = (
    "Lily and Tom went to the park. They saw a big tree with red apples. Tom wanted to climb "
    "it, but Lily said it was too high."
)
STORY_B = (
    "One day, a girl named Mia found a shiny key in the garden. She ran to her mom and asked "
    "what it could open."
)


def _engine(model: Path, **kw: Any) -> LLMEngine:
    opts: dict[str, Any] = dict(dtype="float32", block_size=BS, num_blocks=10, max_model_len=64)
    opts.update(kw)
    return LLMEngine.from_pretrained(model, **opts)


def _run(engine: LLMEngine, prompt: str, rid: str) -> RequestOutput:
    engine.add_request(rid, prompt, GREEDY)
    final = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            engine.scheduler.check_integrity()
            if out.finished:
                final = out
    assert final is not None
    return final


def _full_blocks(engine: LLMEngine, prompt: str) -> int:
    """Blocks a prefix match can serve: every full block but one token always computed."""
    ids = engine.tokenizer.encode(prompt)
    assert len(prefix_block_hashes(ids, BS)) == len(ids) // BS
    return (len(ids) - 1) // BS


def test_ram_tier_serves_evicted_blocks_with_equal_greedy_output(tinystories_dir: Path) -> None:
    plain = _engine(tinystories_dir)
    cold = _run(plain, STORY_A, "cold")

    engine = _engine(tinystories_dir, kv_ram_bytes=64 * 2**20)
    first = _run(engine, STORY_A, "a1")
    _run(engine, STORY_B, "b")  # a 10-block pool: B evicts most of A (tail first)
    again = _run(engine, STORY_A, "a2")

    n = _full_blocks(engine, STORY_A)
    assert first.num_cached_tokens == 0
    assert again.num_cached_tokens == n * BS
    assert again.num_cached_tokens_by_tier["ram"] > 0
    assert sum(again.num_cached_tokens_by_tier.values()) == again.num_cached_tokens
    assert again.output_token_ids == first.output_token_ids == cold.output_token_ids
    stats = engine.stats()
    assert sum(stats.prefix_cache_hits_tokens_by_tier.values()) == stats.prefix_cache_hits_tokens
    assert stats.prefix_cache_hits_tokens_by_tier["ram"] == again.num_cached_tokens_by_tier["ram"]
    tiers = engine.kv_tiers
    assert tiers is not None
    assert stats.kv_tier_blocks == {"ram": tiers.num_ram_blocks, "disk": 0}
    assert tiers.num_loaded * BS == again.num_cached_tokens_by_tier["ram"]


def test_ram_tier_blocks_are_the_pool_bytes(tinystories_dir: Path) -> None:
    engine = _engine(tinystories_dir, kv_ram_bytes=64 * 2**20)
    ids = engine.tokenizer.encode(STORY_A)
    _run(engine, STORY_A, "a")
    bm = engine.scheduler.block_manager
    before = {
        h: [
            (layer.k_cache[b].clone(), layer.v_cache[b].clone())
            for layer in engine.runner.kv_caches
        ]
        for b, h, _, _ in bm.cached_blocks()
    }
    _run(engine, STORY_B, "b")
    tiers = engine.kv_tiers
    assert tiers is not None and tiers.host is not None
    demoted = [h for h in prefix_block_hashes(ids, BS) if h in tiers.host]
    assert demoted
    for h in demoted:
        slot = tiers.host.block(tiers.host.entries[h].slot)
        for i, (k, v) in enumerate(before[h]):
            assert torch.equal(slot[i, 0], k) and torch.equal(slot[i, 1], v)


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "int8", "fp8"])
def test_disk_tier_survives_a_restart(
    tinystories_dir: Path, tmp_path: Path, kv_cache_dtype: str
) -> None:
    first_engine = _engine(
        tinystories_dir, kv_disk_dir=str(tmp_path), kv_cache_dtype=kv_cache_dtype
    )
    cold = _run(first_engine, STORY_A, "cold")
    warm = _run(first_engine, STORY_A, "warm")  # from the pool
    pool_bytes = {
        h: torch.stack(
            [
                torch.stack((layer.k_cache[b], layer.v_cache[b]))
                for layer in first_engine.runner.kv_caches
            ]
        )
        for b, h, _, _ in first_engine.scheduler.block_manager.cached_blocks()
    }
    written = first_engine.close()
    assert written == len(pool_bytes)
    assert first_engine.close() == 0  # idempotent
    files = list(tmp_path.glob(f"*/*{BLOCK_FILE_SUFFIX}"))
    assert len(files) == written
    key = json.loads(next(tmp_path.glob("*/key.json")).read_text())
    assert key["block_size"] == BS and key["kv_dtype"] == first_engine.kv_tiers.disk.key.kv_dtype  # type: ignore[union-attr]

    restarted = _engine(tinystories_dir, kv_disk_dir=str(tmp_path), kv_cache_dtype=kv_cache_dtype)
    restored = _run(restarted, STORY_A, "restored")
    n = _full_blocks(restarted, STORY_A)
    assert restored.num_cached_tokens == n * BS
    assert restored.num_cached_tokens_by_tier == {"pool": 0, "ram": 0, "disk": n * BS}
    assert restored.output_token_ids == warm.output_token_ids
    if kv_cache_dtype == "auto":
        assert restored.output_token_ids == cold.output_token_ids
    bm = restarted.scheduler.block_manager
    ids = restarted.tokenizer.encode(STORY_A)
    for h in prefix_block_hashes(ids, BS)[:n]:
        block = bm._cached[h]
        got = torch.stack(
            [
                torch.stack((layer.k_cache[block], layer.v_cache[block]))
                for layer in restarted.runner.kv_caches
            ]
        )
        assert got.dtype == pool_bytes[h].dtype
        assert torch.equal(got.view(torch.uint8), pool_bytes[h].view(torch.uint8))


def test_a_different_kv_dtype_never_reads_the_blocks(tinystories_dir: Path, tmp_path: Path) -> None:
    writer = _engine(tinystories_dir, kv_disk_dir=str(tmp_path))
    _run(writer, STORY_A, "a")
    assert writer.close() > 0
    other = _engine(tinystories_dir, kv_disk_dir=str(tmp_path), kv_cache_dtype="int8")
    assert other.kv_tiers is not None and other.kv_tiers.num_disk_blocks == 0
    out = _run(other, STORY_A, "a")
    assert out.num_cached_tokens == 0
    assert len(list(tmp_path.iterdir())) == 2  # one directory per key


def test_corrupt_and_truncated_blocks_are_dropped_and_recomputed(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    writer = _engine(tinystories_dir, kv_disk_dir=str(tmp_path))
    reference = _run(writer, STORY_A, "a")
    writer.close()
    ids = writer.tokenizer.encode(STORY_A)
    hashes = prefix_block_hashes(ids, BS)
    disk = writer.kv_tiers.disk  # type: ignore[union-attr]
    assert disk is not None
    # Block 2: one payload byte flipped (same size: only the CRC can tell).
    path = disk.path(hashes[2])
    raw = bytearray(path.read_bytes())
    raw[-7] ^= 0x40
    path.write_bytes(bytes(raw))

    engine = _engine(tinystories_dir, kv_disk_dir=str(tmp_path))
    tiers = engine.kv_tiers
    assert tiers is not None and tiers.disk is not None
    assert tiers.num_disk_blocks == len(list(disk.dir.glob(f"*{BLOCK_FILE_SUFFIX}")))
    out = _run(engine, STORY_A, "a")
    assert out.num_cached_tokens_by_tier == {"pool": 0, "ram": 0, "disk": 2 * BS}
    assert out.output_token_ids == reference.output_token_ids
    assert tiers.disk.num_dropped == 1
    assert not path.exists()

    # Block 0 cut short: found when the tier opens, so nothing of the prefix is served.
    engine.close()
    first = disk.path(hashes[0])
    first.write_bytes(first.read_bytes()[:100])
    reopened = _engine(tinystories_dir, kv_disk_dir=str(tmp_path))
    assert reopened.kv_tiers is not None and reopened.kv_tiers.disk is not None
    assert reopened.kv_tiers.disk.num_dropped == 1
    out = _run(reopened, STORY_A, "again")
    assert out.num_cached_tokens == 0
    assert out.output_token_ids == reference.output_token_ids


def test_ram_tier_spills_to_disk_and_disk_keeps_its_budget(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    probe = _engine(tinystories_dir, kv_ram_bytes=4 * 2**20)
    block_bytes = probe.runner.bytes_per_block
    engine = _engine(
        tinystories_dir,
        kv_ram_bytes=4 * block_bytes,
        kv_disk_dir=str(tmp_path),
        kv_disk_bytes=12 * (block_bytes + 200),
    )
    tiers = engine.kv_tiers
    assert tiers is not None and tiers.host is not None and tiers.disk is not None
    reference = _run(probe, STORY_A, "a")
    _run(engine, STORY_A, "a")
    _run(engine, STORY_B, "b")
    _run(engine, "The sun was hot and the sky was blue. Ben and his mom went to the beach.", "c")
    assert tiers.num_ram_blocks == 4
    assert tiers.num_spilled > 0
    assert tiers.disk.num_bytes <= tiers.disk.capacity_bytes
    files = list(tiers.disk.dir.glob(f"*{BLOCK_FILE_SUFFIX}"))
    assert len(files) == tiers.num_disk_blocks
    assert sum(f.stat().st_size for f in files) == tiers.disk.num_bytes
    again = _run(engine, STORY_A, "a2")
    assert again.output_token_ids == reference.output_token_ids


def test_kv_events_name_the_medium(tinystories_dir: Path) -> None:
    engine = _engine(tinystories_dir, kv_ram_bytes=64 * 2**20)
    recorder = engine.enable_kv_events()
    ids = engine.tokenizer.encode(STORY_A)
    a_hashes = {h & (2**64 - 1) for h in prefix_block_hashes(ids, BS)}
    _run(engine, STORY_A, "a")
    _run(engine, STORY_B, "b")
    events = recorder.take()
    gpu: set[int] = set()
    cpu: set[int] = set()
    for ev in events:
        target = gpu if ev.medium == "GPU" else cpu
        assert ev.medium in ("GPU", MEDIUM_CPU)
        if isinstance(ev, BlockStored):
            target.update(ev.block_hashes)
        elif isinstance(ev, BlockRemoved):
            target.difference_update(ev.block_hashes)
    pool = {h & (2**64 - 1) for h in engine.scheduler.block_manager.cached_block_hashes()}
    assert gpu == pool  # the pool's events alone still reproduce the pool
    tiers = engine.kv_tiers
    assert tiers is not None and tiers.host is not None
    assert cpu == {h & (2**64 - 1) for h in tiers.host.entries}
    assert cpu & a_hashes  # A's evicted blocks went to RAM
    assert MEDIUM_DISK == "DISK"


def test_tier_settings_are_checked(tinystories_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="enable_prefix_caching"):
        _engine(tinystories_dir, kv_ram_bytes=2**20, enable_prefix_caching=False)
    with pytest.raises(ConfigError, match="kv_ram_bytes=10 holds no KV block"):
        _engine(tinystories_dir, kv_ram_bytes=10)
    with pytest.raises(ConfigError, match="kv_disk_bytes"):
        _engine(tinystories_dir, kv_disk_dir=str(tmp_path), kv_disk_bytes=100)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="--kv-disk"):
        _engine(tinystories_dir, kv_disk_dir=str(blocker / "sub"))


def test_a_disk_tier_folder_taken_by_a_file_is_named_in_the_error(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    # DIR/<key> taken by a file gave 'cannot use DIR as the KV disk tier (File exists)', naming
    # a writable DIR and not the file in the way
    engine = _engine(tinystories_dir, kv_disk_dir=str(tmp_path / "kv"))
    assert engine.kv_tiers is not None and engine.kv_tiers.disk is not None
    key_dir = engine.kv_tiers.disk.dir
    engine.close()
    for child in key_dir.iterdir():
        child.unlink()
    key_dir.rmdir()
    key_dir.write_text("not a folder")
    with pytest.raises(ConfigError) as caught:
        _engine(tinystories_dir, kv_disk_dir=str(tmp_path / "kv"))
    assert str(caught.value) == (
        f"cannot use {tmp_path / 'kv'} as the KV disk tier: {key_dir} is not a directory; pass a "
        "writable directory to --kv-disk"
    )


def test_random_workload_with_tight_pool_and_tiers_matches_a_large_pool(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    """Concurrent requests sharing prefixes, a pool small enough to preempt, a 3-block RAM tier
    spilling to a 6-block disk tier: every greedy output equals a 256-block engine's, and the
    block manager's invariants hold after every step."""
    import random

    rng = random.Random(7)
    stems = [STORY_A, STORY_B, "The sun was hot and the sky was blue."]
    prompts = [
        rng.choice(stems)
        + " "
        + " ".join(
            rng.choice(["Tom", "Lily", "a cat", "the ball"]) for _ in range(rng.randint(0, 4))
        )
        for _ in range(14)
    ]
    reference = _engine(tinystories_dir, num_blocks=256)
    expected = [_run(reference, p, f"r{i}").output_token_ids for i, p in enumerate(prompts)]
    probe = reference.runner.bytes_per_block
    engine = _engine(
        tinystories_dir,
        num_blocks=12,
        kv_ram_bytes=3 * probe,
        kv_disk_dir=str(tmp_path),
        kv_disk_bytes=6 * (probe + 200),
    )
    got: dict[str, list[int]] = {}
    pending = list(enumerate(prompts))
    while pending or engine.has_unfinished_requests():
        for _ in range(rng.randint(0, 3)):
            if pending:
                i, prompt = pending.pop(0)
                engine.add_request(f"q{i}", prompt, GREEDY)
        for out in engine.step():
            engine.scheduler.check_integrity()
            if out.finished:
                got[out.request_id] = out.output_token_ids
    assert [got[f"q{i}"] for i in range(len(prompts))] == expected
    stats = engine.stats()
    assert stats.prefix_cache_hits_tokens_by_tier["ram"] > 0
    assert stats.prefix_cache_hits_tokens_by_tier["disk"] > 0
    assert stats.num_preemptions > 0


def test_llm_context_manager_persists_the_disk_tier(tinystories_dir: Path, tmp_path: Path) -> None:
    from promptcache.engine import LLM

    opts: dict[str, Any] = dict(dtype="float32", block_size=BS, num_blocks=10, max_model_len=64)
    with LLM(tinystories_dir, kv_disk_dir=str(tmp_path), **opts) as llm:
        [first] = llm.generate(STORY_A, GREEDY)
    with LLM(tinystories_dir, kv_disk_dir=str(tmp_path), **opts) as llm:
        [again] = llm.generate(STORY_A, GREEDY)
    assert again.num_cached_tokens_by_tier["disk"] == _full_blocks(llm.engine, STORY_A) * BS
    assert again.output_token_ids == first.output_token_ids


def test_an_llm_left_open_writes_only_the_blocks_it_evicted(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    # docs/engine.md, across restarts: close() (or the end of a with block) writes the cached
    # blocks; an LLM left open has written only what its pool evicted, here nothing
    from promptcache.engine import LLM

    opts: dict[str, Any] = dict(dtype="float32", block_size=BS, max_model_len=64)
    left_open = LLM(tinystories_dir, kv_disk_dir=str(tmp_path), **opts)
    [first] = left_open.generate(STORY_A, GREEDY)
    assert left_open.engine.stats().kv_tier_blocks["disk"] == 0
    with LLM(tinystories_dir, kv_disk_dir=str(tmp_path), **opts) as llm:
        [again] = llm.generate(STORY_A, GREEDY)
    assert again.num_cached_tokens == 0
    assert again.output_token_ids == first.output_token_ids
    with LLM(tinystories_dir, kv_disk_dir=str(tmp_path), **opts) as llm:  # the with block wrote
        [third] = llm.generate(STORY_A, GREEDY)
    assert third.num_cached_tokens_by_tier["disk"] == _full_blocks(llm.engine, STORY_A) * BS


def test_an_engine_left_open_has_on_disk_only_the_blocks_that_left_ram(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    # docs/engine.md, across restarts: before close(), the disk holds the blocks evicted from
    # the RAM tier, or from the pool when there is no RAM tier
    with_ram = _engine(tinystories_dir, kv_disk_dir=str(tmp_path / "ram"), kv_ram_bytes=2**26)
    without_ram = _engine(tinystories_dir, kv_disk_dir=str(tmp_path / "pool"))
    for engine in (with_ram, without_ram):
        _run(engine, STORY_A, "a")
        _run(engine, STORY_B, "b")  # a 10-block pool: B evicts most of A
    assert with_ram.stats().kv_tier_blocks["ram"] > 0
    assert with_ram.stats().kv_tier_blocks["disk"] == 0
    assert without_ram.stats().kv_tier_blocks["disk"] > 0


def test_a_prefix_of_more_disk_blocks_than_are_kept_staged_is_restored(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    """More disk hits in one request than `MAX_STAGED_BLOCKS`: every block read for the match
    stays staged until its load (an engine that dropped the oldest ones failed the load)."""
    from promptcache.engine.kv_tiers.tiered_cache import MAX_STAGED_BLOCKS

    story = " ".join(f"Lily saw {i} red apples and Tom ran to the park." for i in range(40))
    opts: dict[str, Any] = dict(num_blocks=200, max_model_len=512, kv_disk_dir=str(tmp_path))
    writer = _engine(tinystories_dir, **opts)
    reference = _run(writer, story, "a")
    writer.close()
    n = _full_blocks(writer, story)
    assert n > MAX_STAGED_BLOCKS + 10
    restarted = _engine(tinystories_dir, **opts)
    out = _run(restarted, story, "b")
    assert out.num_cached_tokens_by_tier == {"pool": 0, "ram": 0, "disk": n * BS}
    assert out.output_token_ids == reference.output_token_ids
    tiers = restarted.kv_tiers
    assert tiers is not None and tiers.num_loaded == n
    assert tiers.num_resident_blocks == min(tiers.num_disk_blocks, restarted.runner.num_blocks)


def _hit_after_restart_within(
    model: Path, tmp_path: Path, prompt: str, num_files: int, **kw: Any
) -> RequestOutput:
    """`prompt`'s output on an engine restarted over the disk tier in `tmp_path` with a budget
    of `num_files` block files (the least recently used files beyond it deleted at open)."""
    probe = _engine(model, kv_disk_dir=str(tmp_path / "probe"))
    assert probe.kv_tiers is not None and probe.kv_tiers.disk is not None
    budget = num_files * probe.kv_tiers.disk.file_bytes
    restarted = _engine(model, kv_disk_dir=str(tmp_path / "kv"), kv_disk_bytes=budget, **kw)
    assert restarted.kv_tiers is not None and restarted.kv_tiers.disk is not None
    assert restarted.kv_tiers.num_disk_blocks == num_files
    assert restarted.kv_tiers.disk.num_trimmed_at_open > 0
    return _run(restarted, prompt, "after-restart")


def test_a_smaller_disk_budget_after_restart_keeps_a_prefix_not_its_tail(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    """close() writes a chain's blocks so that a budget that keeps only some of them keeps its
    leading blocks: a tail block without its parent can never be hit, so keeping it instead of
    the first block serves nothing."""
    writer = _engine(tinystories_dir, kv_disk_dir=str(tmp_path / "kv"))
    _run(writer, STORY_A, "a")
    n = _full_blocks(writer, STORY_A)
    assert writer.close() >= n > 2
    out = _hit_after_restart_within(tinystories_dir, tmp_path, STORY_A, n - 1)
    assert out.num_cached_tokens_by_tier == {"pool": 0, "ram": 0, "disk": (n - 1) * BS}


def test_a_smaller_disk_budget_after_restart_keeps_the_most_recently_used_prompt(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    """The RAM tier holds what the pool evicted, so its blocks are older than the pool's: with
    room for only the newest prompt's blocks after a restart, that prompt is served from disk."""
    writer = _engine(tinystories_dir, kv_disk_dir=str(tmp_path / "kv"), kv_ram_bytes=64 * 2**20)
    _run(writer, STORY_A, "a")
    _run(writer, STORY_B, "b")  # evicts most of A into RAM (tail first)
    tiers = writer.kv_tiers
    assert tiers is not None and tiers.num_ram_blocks > 0
    n = _full_blocks(writer, STORY_B)
    writer.close()
    out = _hit_after_restart_within(tinystories_dir, tmp_path, STORY_B, n)
    assert out.num_cached_tokens_by_tier == {"pool": 0, "ram": 0, "disk": n * BS}
