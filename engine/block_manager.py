"""Paged KV block pool bookkeeping with automatic prefix caching (pure Python, no torch).

The model runner owns the KV tensors ([num_blocks, block_size, num_kv_heads, head_dim] per layer);
this module only decides which block ids each sequence uses. Design after vLLM's automatic prefix
caching (https://docs.vllm.ai/en/latest/design/prefix_caching.html, checked 2026-11-30):

- A *full* block's hash is ``H(parent block hash, the block's token ids, extra keys)``; the extra
  keys of block 0 carry the optional cache salt, so tenants with different salts never share.
  Partial blocks are never cached. A prefix match stops one token short of the sequence, so the
  last prompt token is always recomputed (its logits are needed to sample).
- A block is registered in the hash table only after the model has computed it
  (`mark_computed`), so a hit never reads K/V that are still being written.
- Blocks are reference counted. A block whose count drops to 0 enters the free queue but keeps
  its hash: it can still be hit until it is evicted. The free queue is LRU (an OrderedDict,
  O(1) removal on a hit); a released sequence's blocks enter it tail-first, so the end of a
  hash chain is evicted before its start, and blocks without a hash go to the front.
- Allocation pops the queue's front, evicting that block's hash.
- `fork` shares every block of a sequence with a new sample; the first write into a shared
  block copies it (copy-on-write, returned as (src, dst) pairs for the runner).
- Optional swap: a CPU pool of block ids; `swap_out` / `swap_in` return (src, dst) pairs.
- Optional `event_sink` (`BlockEventSink`): told of every hash entering or leaving the table
  and of resets, the source of vLLM-format KV events (`promptcache.engine.kv_events`).
- Optional `tier_store` (`BlockTierStore`, `promptcache.engine.kv_tiers`): lower cache tiers
  (host RAM, disk). An evicted cached block is handed to it (demotion); a prefix match that
  misses the pool goes on in the tiers, and each tier hit is given a fresh block that the
  runner fills before the forward pass (promotion, `take_loads`).
- Optional `sliding_window` (tokens): for a model whose every layer attends only to the last
  `sliding_window` positions (Mistral's ``sliding_window``), `mark_computed` frees the blocks
  that lie entirely before the window of every query still to come, as a ring buffer would;
  their table entries become `WINDOW_FREED`. A freed block keeps its hash: its K/V are exact
  for the whole token prefix its chained hash names, and `match_prefix` walks from block 0 and
  stops at the first block found nowhere, so a later block whose earlier blocks were evicted
  is never served. Freed blocks holding generated tokens enter the free queue at its front
  (reused first, so a long generation cycles through the same few pages); freed prompt blocks
  enter at the tail like any released cached block.

Invariants (checked by `check_integrity`):
  free blocks + used blocks == num_blocks; a block is in the free queue iff its ref_count is 0;
  each ref_count equals the number of running block tables holding the block; every entry of
  the hash table points at a block carrying that hash.

Concurrency: not thread-safe; the scheduler calls it from one thread.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from promptcache.errors import OutOfBlocksError

from .sequence import Sequence, SequenceStatus

__all__ = [
    "BLOCK_HASH_VERSION",
    "NONE_HASH",
    "WINDOW_FREED",
    "Block",
    "BlockEventSink",
    "BlockManager",
    "BlockTierStore",
    "PrefixMatch",
    "TierHit",
    "compute_slot_mapping",
    "hash_block_tokens",
    "prefix_block_hashes",
]


WINDOW_FREED = -1
"""Block-table entry of a block freed because it fell out of the sliding window."""

TIERS = ("pool", "ram", "disk")
"""Where a prefix-cache hit can come from, fastest first."""


def _digest(digest: bytes) -> int:
    return int.from_bytes(digest[:16], "little")


BLOCK_HASH_VERSION = 1
"""Version of `hash_block_tokens`' byte encoding. Bumped whenever the encoding changes, so a
disk tier written under another encoding is never read (it is part of the tier's key)."""

NONE_HASH: int = _digest(
    hashlib.sha256(f"promptcache/prefix-cache/v{BLOCK_HASH_VERSION}".encode()).digest()
)
"""Parent hash of block 0 (fixed, so hashes are stable across processes)."""


def hash_block_tokens(
    parent_hash: int, token_ids: Iterable[int], extra_keys: tuple[str, ...] = ()
) -> int:
    """Chained hash of one full block: 128 bits of SHA-256.

    Args:
        parent_hash: hash of the previous block, or `NONE_HASH` for block 0.
        token_ids: the block's token ids (non-negative ints below 2**63).
        extra_keys: strings that must also match for a hit (the cache salt for block 0).

    Returns:
        A non-negative int below 2**128. Equal inputs give equal hashes in every process.
    """
    tokens = array("q", token_ids)
    h = hashlib.sha256()
    h.update(parent_hash.to_bytes(16, "little"))
    h.update(len(tokens).to_bytes(4, "little"))
    h.update(tokens.tobytes())
    for key in extra_keys:
        raw = key.encode("utf-8")
        h.update(b"\x00key" + len(raw).to_bytes(4, "little") + raw)
    return _digest(h.digest())


def prefix_block_hashes(
    token_ids: list[int], block_size: int, cache_salt: str | None = None
) -> list[int]:
    """Chained hashes of every full block of a prompt, as `BlockManager.block_hashes` gives them.

    For routers that predict which blocks an engine holds (the proxy's ``kv_events`` policy):
    the same tokens, block size and salt give the same hashes in every process.

    Args:
        token_ids: the prompt's token ids, exactly as the engine tokenises it.
        block_size: tokens per KV block (the engine's ``--block-size``).
        cache_salt: the request's ``cache_salt`` (an extra key of block 0), or None.

    Returns:
        ``len(token_ids) // block_size`` ints below 2**128, block 0 first.
    """
    hashes: list[int] = []
    parent = NONE_HASH
    for i in range(len(token_ids) // block_size):
        extra = (cache_salt,) if i == 0 and cache_salt is not None else ()
        parent = hash_block_tokens(parent, token_ids[i * block_size : (i + 1) * block_size], extra)
        hashes.append(parent)
    return hashes


def compute_slot_mapping(
    block_table: list[int], block_size: int, start: int, end: int
) -> list[int]:
    """KV slots for token positions [start, end): ``block_id * block_size + offset``.

    Raises:
        IndexError: if `block_table` does not cover position `end - 1`.
    """
    return [
        block_table[pos // block_size] * block_size + pos % block_size for pos in range(start, end)
    ]


@dataclass(slots=True, eq=False)
class Block:
    """One KV block's metadata. `token_ids` and `parent_hash` back the hash-collision guard."""

    block_id: int
    ref_count: int = 0
    block_hash: int | None = None
    parent_hash: int | None = None
    token_ids: tuple[int, ...] = ()

    def clear_hash(self) -> None:
        """Forget the cached content (the block is being reused or the cache reset)."""
        self.block_hash = None
        self.parent_hash = None
        self.token_ids = ()


class BlockEventSink(Protocol):
    """Receives prefix-cache changes as they happen (`promptcache.engine.kv_events`).

    Hashes are `hash_block_tokens` values. Called on the scheduler's thread, inside the
    mutation; a sink must only record (no I/O).
    """

    def block_stored(
        self, block_hash: int, parent_hash: int | None, token_ids: tuple[int, ...]
    ) -> None:
        """A full computed block became findable by `block_hash` (`parent_hash` None: block 0)."""

    def block_removed(self, block_hash: int) -> None:
        """A cached block was evicted; `block_hash` no longer hits."""

    def all_blocks_cleared(self) -> None:
        """Every cached hash was forgotten (`reset_prefix_cache`)."""


class BlockTierStore(Protocol):
    """Lower cache tiers below the pool (`promptcache.engine.kv_tiers.KVTiers`).

    Called on the scheduler's thread. Hashes are `hash_block_tokens` values; a tier name is
    "ram" or "disk".
    """

    def block_evicted(
        self, block_id: int, block_hash: int, parent_hash: int, token_ids: tuple[int, ...]
    ) -> None:
        """Pool block `block_id` is about to be reused (demotion): its K/V must be copied down
        before anything writes into it, which happens only in the runner's next step."""

    def lookup(self, block_hash: int, parent_hash: int, token_ids: tuple[int, ...]) -> str | None:
        """The tier holding this exact block (hash, parent and tokens all equal), or None."""

    def contains(self, block_hash: int) -> bool:
        """Whether some tier holds `block_hash` (no collision guard; for ranking)."""

    def prepare(self, block_hash: int) -> bool:
        """Make a hit ready to load (a disk block is read and its checksum checked).

        Returns False when the block turned out unusable (it is then dropped).
        """

    def pin(self, block_hash: int) -> None:
        """Keep this entry (and its data) in place until the next `KVTiers.load`."""


class TierHit(NamedTuple):
    """One block of a prefix match served by a lower tier."""

    position: int  # index in the sequence's block table
    block_hash: int
    tier: str  # "ram" or "disk"


class PrefixMatch(NamedTuple):
    """Result of `BlockManager.match_prefix`; valid only until the manager's next mutation.

    Attributes:
        block_ids: pool blocks of the match, in block-table order (tier hits excluded).
        num_cached_tokens: tokens served from the cache, pool and tiers (a multiple of
            block_size).
        num_free_hits: how many of `block_ids` sit in the free queue (ref_count 0); taking
            them shrinks the pool of blocks available for new allocations.
        version: the manager's mutation counter when the match was made.
        tier_hits: blocks found in a lower tier (each needs a fresh pool block), in order.
    """

    block_ids: list[int]
    num_cached_tokens: int
    num_free_hits: int
    version: int
    tier_hits: tuple[TierHit, ...] = ()


class BlockManager:
    """Allocates KV block ids to sequences, with prefix caching, copy-on-write and swap.

    Args:
        num_blocks: blocks in the device KV pool (>= 1).
        block_size: tokens per block (>= 1).
        enable_prefix_caching: hash and reuse full blocks.
        num_cpu_blocks: blocks in the CPU swap pool (0 = no swap).
        sliding_window: tokens each query attends back over in EVERY layer (the largest
            layer window), or None when some layer attends to its whole context: then no
            block is ever freed before its sequence ends.

    Methods that change state say so; every other method only reads. Methods that need free
    blocks raise `OutOfBlocksError` *without changing anything* when the pool is short; the
    scheduler catches it and preempts (the error never reaches users).
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        *,
        enable_prefix_caching: bool = True,
        num_cpu_blocks: int = 0,
        sliding_window: int | None = None,
    ) -> None:
        if num_blocks < 1 or block_size < 1 or num_cpu_blocks < 0:
            raise ValueError(
                f"need num_blocks >= 1, block_size >= 1, num_cpu_blocks >= 0; got "
                f"{num_blocks}, {block_size}, {num_cpu_blocks}"
            )
        if sliding_window is not None and sliding_window < 1:
            raise ValueError(f"sliding_window must be >= 1 or None, got {sliding_window}")
        self.sliding_window = sliding_window
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.num_cpu_blocks = num_cpu_blocks
        self.blocks = [Block(i) for i in range(num_blocks)]
        # LRU free queue: first key = next to evict. Values unused (OrderedDict as linked list).
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._cached: dict[int, int] = {}  # block hash -> block id
        self._cpu_free: list[int] = list(range(num_cpu_blocks - 1, -1, -1))
        self._version = 0
        self.prefix_cache_queries_tokens = 0
        self.prefix_cache_hits_tokens = 0
        #: Of ``prefix_cache_hits_tokens``, the tokens each tier served ("pool", "ram", "disk").
        self.prefix_cache_hits_tokens_by_tier = dict.fromkeys(TIERS, 0)
        #: Where cache changes are reported (KV events), or None.
        self.event_sink: BlockEventSink | None = None
        #: Lower cache tiers (demotion on eviction, promotion on a match), or None.
        self.tier_store: BlockTierStore | None = None
        self._loads: list[tuple[int, int]] = []  # (block hash, pool block) promoted, not loaded

    # Queries ---------------------------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        """Blocks with ref_count 0 (cached-but-unused ones included: they are evictable)."""
        return len(self._free)

    @property
    def num_used_blocks(self) -> int:
        """Blocks referenced by at least one sequence."""
        return self.num_blocks - len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of the pool referenced by sequences, 0..1."""
        return self.num_used_blocks / self.num_blocks

    @property
    def num_cached_blocks(self) -> int:
        """Blocks currently findable by hash (in use or in the free queue)."""
        return len(self._cached)

    @property
    def num_free_cpu_blocks(self) -> int:
        """Free blocks in the CPU swap pool."""
        return len(self._cpu_free)

    def num_held_blocks(self, seq: Sequence) -> int:
        """Blocks `seq` holds now (its table less the entries the sliding window freed)."""
        return sum(block_id != WINDOW_FREED for block_id in seq.block_table)

    def cached_block_hashes(self) -> set[int]:
        """Hashes that hit now (blocks in use or in the free queue): what KV events describe."""
        return set(self._cached)

    def free_block_ids(self) -> list[int]:
        """Free queue in eviction order (first = evicted next). For tests and debugging."""
        return list(self._free)

    def block_hashes(self, seq: Sequence) -> list[int]:
        """Chained hashes of every full block of `seq.token_ids`.

        Memoised in `seq.block_hashes` (extended, never rewritten, as tokens only grow); no
        other state changes.
        """
        hashes = seq.block_hashes
        bs = self.block_size
        for i in range(len(hashes), seq.num_tokens // bs):
            parent = hashes[i - 1] if i else NONE_HASH
            extra = (seq.cache_salt,) if i == 0 and seq.cache_salt is not None else ()
            hashes.append(hash_block_tokens(parent, seq.token_ids[i * bs : (i + 1) * bs], extra))
        return hashes

    def match_prefix(self, seq: Sequence) -> PrefixMatch:
        """Longest run of cached full blocks at the start of `seq`, leaving >= 1 token to compute.

        Each block is looked up in the pool first, then in the lower tiers (`tier_store`); the
        run stops at the first block found in neither. Changes nothing (except memoising block
        hashes). The result is valid until the next mutating call; `allocate` recomputes a
        stale one.
        """
        if not self.enable_prefix_caching:
            return PrefixMatch([], 0, 0, self._version)
        max_blocks = (seq.num_tokens - 1) // self.block_size
        hashes = self.block_hashes(seq)
        block_ids: list[int] = []
        tier_hits: list[TierHit] = []
        num_free_hits = 0
        tiers = self.tier_store
        for i in range(max_blocks):
            start = i * self.block_size
            parent = hashes[i - 1] if i else NONE_HASH
            tokens = tuple(seq.token_ids[start : start + self.block_size])
            block_id = self._cached.get(hashes[i])
            if block_id is not None:
                block = self.blocks[block_id]
                # Collision guard: the stored tokens and parent must match too.
                if block.parent_hash != parent or block.token_ids != tokens:
                    break
                block_ids.append(block_id)
                num_free_hits += block.ref_count == 0
                continue
            tier = tiers.lookup(hashes[i], parent, tokens) if tiers is not None else None
            if tier is None:
                break
            tier_hits.append(TierHit(i, hashes[i], tier))
        num_cached = (len(block_ids) + len(tier_hits)) * self.block_size
        return PrefixMatch(block_ids, num_cached, num_free_hits, self._version, tuple(tier_hits))

    def prepare_tier_hits(self, seq: Sequence, match: PrefixMatch) -> PrefixMatch:
        """`match` cut at its first tier hit that cannot be loaded (a disk block that fails its
        checksum, or vanished), after asking the tier store to make each hit ready.

        Changes no pool state; a dropped tier entry is gone from its tier.
        """
        if not match.tier_hits or self.tier_store is None:
            return match
        for n, hit in enumerate(match.tier_hits):
            if not self.tier_store.prepare(hit.block_hash):
                # Positions before the bad block: `n` tier hits, the rest pool hits.
                pool_ids = match.block_ids[: hit.position - n]
                free_hits = sum(self.blocks[b].ref_count == 0 for b in pool_ids)
                return PrefixMatch(
                    pool_ids,
                    hit.position * self.block_size,
                    free_hits,
                    match.version,
                    match.tier_hits[:n],
                )
        return match

    def cached_prefix_tokens(self, seq: Sequence) -> int:
        """Tokens `match_prefix` would serve (pool and tiers), from hash lookups alone (no
        collision guard).

        For ranking waiting requests each step: cheaper than `match_prefix`, and equal to it
        unless two different blocks collide in 128 bits. Changes nothing but the hash memo.
        """
        if not self.enable_prefix_caching:
            return 0
        hashes = self.block_hashes(seq)
        cached = self._cached
        tiers = self.tier_store
        num_blocks = 0
        for block_hash in hashes[: (seq.num_tokens - 1) // self.block_size]:
            if block_hash not in cached and (tiers is None or not tiers.contains(block_hash)):
                break
            num_blocks += 1
        return num_blocks * self.block_size

    def can_allocate(self, seq: Sequence, match: PrefixMatch, num_new_tokens: int) -> bool:
        """Whether `allocate(seq, match, num_new_tokens)` would succeed now. Changes nothing."""
        if match.version != self._version:
            match = self.match_prefix(seq)
        needed = self._blocks_for(match.num_cached_tokens + num_new_tokens) - len(match.block_ids)
        return needed <= len(self._free) - self._free_hits_taken(match)

    def can_append_slots(self, seq: Sequence, num_new_tokens: int) -> bool:
        """Whether `append_slots(seq, num_new_tokens)` would succeed now. Changes nothing."""
        return self._append_cost(seq, num_new_tokens) <= len(self._free)

    def append_cost(self, seq: Sequence, num_new_tokens: int) -> int:
        """Free blocks `append_slots(seq, num_new_tokens)` would take (new blocks plus
        copy-on-write copies). Changes nothing."""
        return self._append_cost(seq, num_new_tokens)

    # Mutations -------------------------------------------------------------------------------

    def allocate(self, seq: Sequence, match: PrefixMatch, num_new_tokens: int) -> None:
        """Give a sequence with no blocks its cached prefix plus room for `num_new_tokens`.

        Changes state: takes a reference on each hit block (removing it from the free queue;
        with a `sliding_window`, leading pool hits wholly before the window of the first
        position to compute are not taken and stand as `WINDOW_FREED`), gives each tier hit
        a fresh block registered under its hash (loaded by the runner, see `take_loads`),
        pops blocks for positions [num_cached, num_cached + num_new_tokens), sets
        `seq.block_table` and `seq.num_computed_tokens` (= cached tokens), sets
        `seq.num_cached_tokens` on first admission, and counts prefix-cache query/hit tokens.

        Raises:
            OutOfBlocksError: not enough free blocks (nothing changed).
            ValueError: `seq` already holds blocks.
        """
        if seq.block_table:
            raise ValueError(f"allocate() needs a sequence without blocks, got {seq!r}")
        if match.version != self._version:
            match = self.prepare_tier_hits(seq, self.match_prefix(seq))
        num_tokens = match.num_cached_tokens + num_new_tokens
        needed = self._blocks_for(num_tokens) - len(match.block_ids)
        available = len(self._free) - self._free_hits_taken(match)
        if needed > available:
            raise OutOfBlocksError(
                f"need {needed} free KV blocks for {num_new_tokens} new tokens, have {available}"
            )
        skip = self._window_skip(match)
        for block_id in match.block_ids[skip:]:
            self._take(block_id)
        if match.tier_hits and self.tier_store is not None:
            for hit in match.tier_hits:  # before any pop: a demotion must not evict them
                self.tier_store.pin(hit.block_hash)
        pool_ids = iter(match.block_ids[skip:])
        tier_at = {hit.position: hit for hit in match.tier_hits}
        table: list[int] = [WINDOW_FREED] * skip
        for i in range(skip, len(match.block_ids) + len(tier_at)):
            table.append(next(pool_ids) if i not in tier_at else self._pop_free())
        table += [self._pop_free() for _ in range(needed - len(tier_at))]
        seq.block_table = table
        if tier_at:
            self._register(seq, 0, len(match.block_ids) + len(tier_at))
            for hit in match.tier_hits:
                self._loads.append((hit.block_hash, table[hit.position]))
        seq.num_computed_tokens = match.num_cached_tokens
        num_ram = sum(h.tier == "ram" for h in match.tier_hits) * self.block_size
        num_disk = len(match.tier_hits) * self.block_size - num_ram
        if seq.num_preemptions == 0:
            seq.num_cached_tokens = match.num_cached_tokens
            seq.num_cached_tokens_by_tier = (
                match.num_cached_tokens - num_ram - num_disk,
                num_ram,
                num_disk,
            )
        if self.enable_prefix_caching:
            self.prefix_cache_queries_tokens += seq.num_tokens
            self.prefix_cache_hits_tokens += match.num_cached_tokens
            by_tier = self.prefix_cache_hits_tokens_by_tier
            by_tier["pool"] += match.num_cached_tokens - num_ram - num_disk
            by_tier["ram"] += num_ram
            by_tier["disk"] += num_disk
        self._version += 1

    def take_loads(self) -> list[tuple[int, int]]:
        """Promotions planned since the last call: (block hash, pool block id) pairs whose K/V
        the runner must copy up from the tiers before the forward pass (after swap-ins).

        Changes state: empties the list.
        """
        loads, self._loads = self._loads, []
        return loads

    def cached_blocks(self) -> list[tuple[int, int, int, tuple[int, ...]]]:
        """Every pool block findable by hash: (block id, hash, parent hash, token ids), least
        recently used first: the free queue's cached blocks in eviction order (a chain's tail
        before its head, as sequences free them), then the blocks in use, each chain's later
        blocks before its earlier ones.

        Changes nothing. Used to write the pool's cached blocks to the disk tier at close, in
        that order, so the disk tier's LRU order (which survives a restart) is the pool's.
        """
        free = [b for b in self._free if self.blocks[b].block_hash is not None]
        in_use = [b for b in reversed(self._cached.values()) if self.blocks[b].ref_count > 0]
        out = []
        for block_id in free + in_use:
            block = self.blocks[block_id]
            assert block.block_hash is not None and block.parent_hash is not None
            out.append((block_id, block.block_hash, block.parent_hash, block.token_ids))
        return out

    def append_slots(self, seq: Sequence, num_new_tokens: int) -> list[tuple[int, int]]:
        """Make room for positions [num_computed, num_computed + num_new_tokens) of a running seq.

        Changes state: appends blocks to `seq.block_table`; a shared block about to be written
        is replaced by a private copy (its reference moves to the new block).

        Returns:
            Copy-on-write pairs (src_block_id, dst_block_id) the runner must copy before the
            forward pass.

        Raises:
            OutOfBlocksError: not enough free blocks (nothing changed).
        """
        cost = self._append_cost(seq, num_new_tokens)
        available = len(self._free)
        if cost > available:
            raise OutOfBlocksError(
                f"need {cost} free KV blocks for {num_new_tokens} new tokens, have {available}"
            )
        copies: list[tuple[int, int]] = []
        table = seq.block_table
        first = seq.num_computed_tokens // self.block_size
        last = self._blocks_for(seq.num_computed_tokens + num_new_tokens)
        for i in range(first, min(last, len(table))):
            src = self.blocks[table[i]]
            if src.ref_count > 1:
                dst = self._pop_free()
                src.ref_count -= 1
                table[i] = dst
                copies.append((src.block_id, dst))
        table.extend(self._pop_free() for _ in range(last - len(table)))
        self._version += 1
        return copies

    def mark_computed(self, seq: Sequence, num_tokens: int) -> None:
        """Record that the model computed `num_tokens` more tokens of `seq` (after a step).

        Changes state: advances `seq.num_computed_tokens` and registers the hash of every block
        that became full and computed, unless another block already holds that content. With a
        `sliding_window`, then releases every block lying wholly before the window of the next
        position to compute (`WINDOW_FREED` in the table).

        Raises:
            ValueError: if that would pass the tokens known or the blocks held.
        """
        before = seq.num_computed_tokens
        after = before + num_tokens
        if after > seq.num_tokens or self._blocks_for(after) > len(seq.block_table):
            raise ValueError(f"cannot mark {num_tokens} tokens computed for {seq!r}")
        seq.num_computed_tokens = after
        if self.enable_prefix_caching:
            self._register(seq, before // self.block_size, after // self.block_size)
        if self.sliding_window is not None:
            self._free_outside_window(seq)

    def trim_to_computed(self, seq: Sequence) -> int:
        """Release the blocks at the end of `seq`'s table that hold no computed token.

        Speculative decoding's rollback: `append_slots` gave room for a decode's draft tokens,
        `mark_computed` advanced only over the accepted ones, and the blocks past
        ``ceil(num_computed_tokens / block_size)`` held rejected drafts only. They were
        allocated fresh this step and never registered (a block is hashed only once full and
        computed), so they join the free queue at its front. The partial block that holds the
        last computed tokens is kept; its slots past them are written again by the next step
        before anything reads them.

        Changes state: shortens `seq.block_table`.

        Returns:
            Blocks released.
        """
        keep = self._blocks_for(seq.num_computed_tokens)
        table = seq.block_table
        released = table[keep:]
        del table[keep:]
        for block_id in reversed(released):
            if block_id != WINDOW_FREED:
                self._release(block_id)
        if released:
            self._version += 1
        return len(released)

    def free(self, seq: Sequence) -> None:
        """Drop `seq`'s references (device blocks; CPU blocks if it is SWAPPED).

        Changes state: clears `seq.block_table`. Device blocks reaching ref_count 0 join the
        free queue tail-first and keep their hash; blocks without a hash go to the front.
        """
        if seq.status is SequenceStatus.SWAPPED:
            self._cpu_free.extend(b for b in reversed(seq.block_table) if b != WINDOW_FREED)
        else:
            for block_id in reversed(seq.block_table):
                if block_id != WINDOW_FREED:
                    self._release(block_id)
        seq.block_table = []
        self._version += 1

    def fork(self, parent: Sequence, sample_index: int) -> Sequence:
        """A new sample of `parent` sharing all its blocks (copy-on-write on the first write).

        Changes state: increments the ref_count of every block in the parent's table.
        """
        child = parent.fork(sample_index)
        for block_id in child.block_table:
            if block_id != WINDOW_FREED:
                self.blocks[block_id].ref_count += 1
        self._version += 1
        return child

    def can_swap_out(self, seq: Sequence) -> bool:
        """Whether the CPU pool can take all of `seq`'s blocks. Changes nothing."""
        return self.num_held_blocks(seq) <= len(self._cpu_free)

    def swap_out(self, seq: Sequence) -> list[tuple[int, int]]:
        """Move `seq`'s blocks to the CPU pool (the caller marks it SWAPPED).

        Changes state: releases the device blocks (they keep their hash) and sets
        `seq.block_table` to CPU block ids.

        Returns:
            (device_block_id, cpu_block_id) pairs the runner must copy before anything else
            in the step, since the device blocks may be reused in the same step.

        Raises:
            OutOfBlocksError: the CPU pool is too small (nothing changed).
        """
        if not self.can_swap_out(seq):
            raise OutOfBlocksError(
                f"need {self.num_held_blocks(seq)} CPU blocks to swap out, have "
                f"{len(self._cpu_free)}"
            )
        mapping = [
            (block_id, self._cpu_free.pop())
            for block_id in seq.block_table
            if block_id != WINDOW_FREED
        ]
        for block_id, _ in reversed(mapping):
            self._release(block_id)
        cpu_ids = iter(cpu for _, cpu in mapping)
        seq.block_table = [
            WINDOW_FREED if block_id == WINDOW_FREED else next(cpu_ids)
            for block_id in seq.block_table
        ]
        self._version += 1
        return mapping

    def can_swap_in(self, seq: Sequence, num_new_tokens: int = 1) -> bool:
        """Whether `seq` can come back and then grow by `num_new_tokens`. Changes nothing."""
        grow = self._blocks_for(seq.num_computed_tokens + num_new_tokens) - len(seq.block_table)
        return self.num_held_blocks(seq) + max(0, grow) <= len(self._free)

    def swap_in(self, seq: Sequence) -> list[tuple[int, int]]:
        """Move a SWAPPED `seq` back into fresh device blocks (the caller marks it RUNNING).

        Changes state: frees its CPU blocks, sets `seq.block_table` to device block ids and
        re-registers hashes of its full computed blocks.

        Returns:
            (cpu_block_id, device_block_id) pairs the runner copies before the forward pass.

        Raises:
            OutOfBlocksError: not enough free device blocks (nothing changed).
        """
        held = self.num_held_blocks(seq)
        if held > len(self._free):
            raise OutOfBlocksError(f"need {held} KV blocks to swap in, have {len(self._free)}")
        mapping = [(cpu, self._pop_free()) for cpu in seq.block_table if cpu != WINDOW_FREED]
        self._cpu_free.extend(cpu for cpu, _ in reversed(mapping))
        dst_ids = iter(dst for _, dst in mapping)
        seq.block_table = [
            WINDOW_FREED if cpu == WINDOW_FREED else next(dst_ids) for cpu in seq.block_table
        ]
        if self.enable_prefix_caching:
            self._register(seq, 0, seq.num_computed_tokens // self.block_size)
        self._version += 1
        return mapping

    def reset_prefix_cache(self) -> None:
        """Forget every cached hash (blocks in use keep their data but can no longer be hit)."""
        for block in self.blocks:
            block.clear_hash()
        self._cached.clear()
        self._version += 1
        if self.event_sink is not None:
            self.event_sink.all_blocks_cleared()

    def check_integrity(self, seqs: Iterable[Sequence]) -> None:
        """Verify the invariants against every live sequence (running, waiting, swapped).

        Changes nothing. Raises AssertionError naming the offending block or sequence (a bug,
        never a user error; explicit raise, so it works under ``python -O``).
        """
        refs = [0] * self.num_blocks
        cpu_used: list[int] = []
        for seq in seqs:
            if seq.status is SequenceStatus.SWAPPED:
                cpu_used.extend(b for b in seq.block_table if b != WINDOW_FREED)
                continue
            if seq.status is not SequenceStatus.RUNNING and seq.block_table:
                raise AssertionError(f"{seq.status.name} sequence holds blocks: {seq!r}")
            if self._blocks_for(seq.num_computed_tokens) > len(seq.block_table):
                raise AssertionError(f"computed tokens not covered by blocks: {seq!r}")
            for i, block_id in enumerate(seq.block_table):
                if block_id != WINDOW_FREED:
                    refs[block_id] += 1
                elif self._window_start(seq) < (i + 1) * self.block_size:
                    raise AssertionError(f"block {i} freed but inside the window: {seq!r}")
        for block in self.blocks:
            if block.ref_count != refs[block.block_id]:
                raise AssertionError(
                    f"block {block.block_id}: ref_count {block.ref_count} but "
                    f"{refs[block.block_id]} block-table references"
                )
            if (block.ref_count == 0) != (block.block_id in self._free):
                raise AssertionError(
                    f"block {block.block_id}: ref_count {block.ref_count}, "
                    f"in free queue: {block.block_id in self._free}"
                )
        if len(self._free) + sum(r > 0 for r in refs) != self.num_blocks:
            raise AssertionError("free + used blocks != num_blocks")
        for block_hash, block_id in self._cached.items():
            if self.blocks[block_id].block_hash != block_hash:
                raise AssertionError(f"hash table entry for block {block_id} is stale")
        hashed = sum(b.block_hash is not None for b in self.blocks)
        if hashed != len(self._cached):
            raise AssertionError(f"{hashed} hashed blocks but {len(self._cached)} table entries")
        all_cpu = cpu_used + self._cpu_free
        if sorted(all_cpu) != list(range(self.num_cpu_blocks)):
            raise AssertionError(f"CPU pool leaked or double-used: {sorted(all_cpu)}")

    # Internals -------------------------------------------------------------------------------

    def _blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def _append_cost(self, seq: Sequence, num_new_tokens: int) -> int:
        table = seq.block_table
        first = seq.num_computed_tokens // self.block_size
        last = self._blocks_for(seq.num_computed_tokens + num_new_tokens)
        shared = sum(
            self.blocks[table[i]].ref_count > 1 for i in range(first, min(last, len(table)))
        )
        return max(0, last - len(table)) + shared

    def _pop_free(self) -> int:
        """Take the least recently freed block, evicting its cached hash."""
        block_id, _ = self._free.popitem(last=False)
        block = self.blocks[block_id]
        if block.block_hash is not None:
            if self._cached.get(block.block_hash) == block_id:
                del self._cached[block.block_hash]
                if self.event_sink is not None:
                    self.event_sink.block_removed(block.block_hash)
                if self.tier_store is not None and block.parent_hash is not None:
                    self.tier_store.block_evicted(
                        block_id, block.block_hash, block.parent_hash, block.token_ids
                    )
            block.clear_hash()
        block.ref_count = 1
        return block_id

    def _take(self, block_id: int) -> None:
        """Take a reference on a cache hit (O(1) removal from the free queue if it was free)."""
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self._free[block_id]
        block.ref_count += 1

    def _release(self, block_id: int) -> None:
        block = self.blocks[block_id]
        block.ref_count -= 1
        if block.ref_count == 0:
            self._free[block_id] = None  # tail: evicted last
            if block.block_hash is None:
                self._free.move_to_end(block_id, last=False)  # nothing worth keeping: evict first

    def _window_skip(self, match: PrefixMatch) -> int:
        """Leading pool hits of `match` wholly before the window of its first new position
        (the sequence will never read them, so `allocate` does not take them)."""
        if self.sliding_window is None or not match.block_ids:
            return 0
        skip = max(0, match.num_cached_tokens - self.sliding_window + 1) // self.block_size
        if match.tier_hits:
            skip = min(skip, match.tier_hits[0].position)
        return min(skip, len(match.block_ids))

    def _free_hits_taken(self, match: PrefixMatch) -> int:
        """How many of the pool hits `allocate` takes sit in the free queue now."""
        skip = self._window_skip(match)
        if not skip:
            return match.num_free_hits
        return sum(self.blocks[b].ref_count == 0 for b in match.block_ids[skip:])

    def _window_start(self, seq: Sequence) -> int:
        """First token position any query still to compute can see (0 without a window).

        The next query is at ``num_computed_tokens`` and sees positions ``> q - window``.
        """
        if self.sliding_window is None:
            return 0
        return max(0, seq.num_computed_tokens - self.sliding_window + 1)

    def _free_outside_window(self, seq: Sequence) -> None:
        """Release the blocks before the window (amortised O(1): walks back to the last freed)."""
        table = seq.block_table
        bs = self.block_size
        end = min(self._window_start(seq) // bs, len(table))
        i = end - 1
        while i >= 0 and table[i] != WINDOW_FREED:
            i -= 1
        for j in range(i + 1, end):
            block_id = table[j]
            table[j] = WINDOW_FREED
            self._release(block_id)
            block = self.blocks[block_id]
            if block.ref_count == 0 and (j + 1) * bs > seq.num_prompt_tokens:
                # Generated tokens: evict first, so the pool cycles through the same pages.
                self._free.move_to_end(block_id, last=False)
        if end > i + 1:
            self._version += 1

    def _register(self, seq: Sequence, first_block: int, end_block: int) -> None:
        hashes = self.block_hashes(seq)
        bs = self.block_size
        for i in range(first_block, end_block):
            if seq.block_table[i] == WINDOW_FREED:
                continue  # fell out of the window (swap-in re-registers from block 0)
            block = self.blocks[seq.block_table[i]]
            if block.block_hash is not None or hashes[i] in self._cached:
                continue  # already cached (a hit), or the same content lives in another block
            block.block_hash = hashes[i]
            block.parent_hash = hashes[i - 1] if i else NONE_HASH
            block.token_ids = tuple(seq.token_ids[i * bs : (i + 1) * bs])
            self._cached[hashes[i]] = block.block_id
            if self.event_sink is not None:
                parent = hashes[i - 1] if i else None
                self.event_sink.block_stored(hashes[i], parent, block.token_ids)
