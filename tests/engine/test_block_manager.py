"""Block manager: prefix-cache hits, eviction order, copy-on-write, salts, swap, leaks."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from promptcache.engine.block_manager import (
    NONE_HASH,
    BlockManager,
    compute_slot_mapping,
    hash_block_tokens,
)
from promptcache.engine.sampling_params import SamplingParams
from promptcache.engine.sequence import Sequence, SequenceStatus
from promptcache.errors import OutOfBlocksError

BS = 4  # small blocks keep the arithmetic readable


def make_seq(tokens: list[int], salt: str | None = None, n: int = 1) -> Sequence:
    return Sequence("req", tokens, SamplingParams(n=n), cache_salt=salt)


def prefill(bm: BlockManager, seq: Sequence, upto: int | None = None) -> int:
    """Admit `seq`, compute its tokens up to `upto` (default: all). Returns cached tokens."""
    match = bm.match_prefix(seq)
    target = seq.num_tokens if upto is None else upto
    bm.allocate(seq, match, target - match.num_cached_tokens)
    seq.status = SequenceStatus.RUNNING
    bm.mark_computed(seq, target - match.num_cached_tokens)
    return match.num_cached_tokens


def finish(bm: BlockManager, seq: Sequence) -> None:
    bm.free(seq)
    seq.status = SequenceStatus.FINISHED


def test_hash_is_chained_and_salted() -> None:
    h0 = hash_block_tokens(NONE_HASH, [1, 2, 3, 4])
    assert h0 == hash_block_tokens(NONE_HASH, (1, 2, 3, 4))
    assert h0 != hash_block_tokens(NONE_HASH, [1, 2, 3, 5])
    assert h0 != hash_block_tokens(NONE_HASH, [1, 2, 3, 4], ("tenant-a",))
    assert hash_block_tokens(h0, [5, 6, 7, 8]) != hash_block_tokens(NONE_HASH, [5, 6, 7, 8])


def test_slot_mapping() -> None:
    assert compute_slot_mapping([7, 2], BS, 2, 6) == [30, 31, 8, 9]


def test_miss_then_hit_counts_tokens() -> None:
    bm = BlockManager(8, BS)
    a = make_seq(list(range(10)))
    assert prefill(bm, a) == 0
    assert bm.prefix_cache_queries_tokens == 10 and bm.prefix_cache_hits_tokens == 0
    finish(bm, a)
    b = make_seq(list(range(10)))
    assert prefill(bm, b) == 8  # two full blocks; the partial third is never cached
    assert b.num_cached_tokens == 8 and b.num_computed_tokens == 10
    assert bm.prefix_cache_queries_tokens == 20 and bm.prefix_cache_hits_tokens == 8
    bm.check_integrity([b])


def test_last_token_always_recomputed() -> None:
    bm = BlockManager(8, BS)
    a = make_seq(list(range(8)))
    prefill(bm, a)
    finish(bm, a)
    b = make_seq(list(range(8)))  # both blocks are cached, but the last token must be computed
    assert bm.match_prefix(b).num_cached_tokens == 4


def test_partial_block_and_divergence() -> None:
    bm = BlockManager(8, BS)
    a = make_seq([1, 2, 3, 4, 5, 6])
    prefill(bm, a)
    assert bm.num_cached_blocks == 1  # only the full block
    assert bm.match_prefix(make_seq([1, 2, 3, 4, 5, 6, 7])).num_cached_tokens == 4
    assert bm.match_prefix(make_seq([1, 2, 3, 4, 9, 9, 9, 9, 9])).num_cached_tokens == 4
    assert bm.match_prefix(make_seq([1, 2, 3, 9, 5, 6, 7])).num_cached_tokens == 0


def test_hit_on_running_sequence_shares_block() -> None:
    bm = BlockManager(8, BS)
    a = make_seq(list(range(9)))
    prefill(bm, a)
    b = make_seq([*range(9), 100])
    assert prefill(bm, b) == 8
    assert b.block_table[:2] == a.block_table[:2]
    assert [bm.blocks[i].ref_count for i in a.block_table] == [2, 2, 1]
    bm.check_integrity([a, b])


def test_eviction_order_after_frees_is_chain_tail_first() -> None:
    bm = BlockManager(6, BS)
    a = make_seq(list(range(12)))  # three full blocks, all hashed once computed
    prefill(bm, a)
    a_blocks = list(a.block_table)
    finish(bm, a)
    # never-used blocks first, then A's blocks tail first
    assert bm.free_block_ids() == [3, 4, 5, *reversed(a_blocks)]
    c = make_seq([50 + i for i in range(16)])
    bm.allocate(c, bm.match_prefix(c), 16)  # 4 blocks: 3 untouched + A's tail
    assert c.block_table == [3, 4, 5, a_blocks[2]]
    again = make_seq(list(range(12)))
    assert bm.match_prefix(again).num_cached_tokens == 8  # A's first two blocks survived


def test_blocks_without_hash_are_evicted_first() -> None:
    bm = BlockManager(4, BS)
    a = make_seq(list(range(6)))  # block 0 hashed, block 1 partial (no hash)
    prefill(bm, a)
    full, partial = a.block_table
    finish(bm, a)
    assert bm.free_block_ids() == [partial, 2, 3, full]


def test_hit_on_free_block_leaves_free_queue_in_o1() -> None:
    bm = BlockManager(4, BS)
    a = make_seq(list(range(5)))
    prefill(bm, a)
    cached_block = a.block_table[0]
    finish(bm, a)
    assert cached_block in bm.free_block_ids()
    b = make_seq(list(range(5)))
    prefill(bm, b)
    assert b.block_table[0] == cached_block and bm.blocks[cached_block].ref_count == 1
    assert cached_block not in bm.free_block_ids()
    bm.check_integrity([b])


def test_copy_on_write_for_forked_samples() -> None:
    bm = BlockManager(8, BS)
    parent = make_seq([1, 2, 3, 4, 5, 6], n=2)
    prefill(bm, parent, upto=5)  # all but the last prompt token, as the scheduler does for n > 1
    child = bm.fork(parent, 1)
    assert child.block_table == parent.block_table
    assert [bm.blocks[i].ref_count for i in parent.block_table] == [2, 2]
    shared_partial = parent.block_table[1]
    copies = bm.append_slots(child, 1)  # writes position 5, inside the shared partial block
    assert copies == [(shared_partial, child.block_table[1])]
    assert child.block_table[0] == parent.block_table[0]  # the full block stays shared
    assert bm.append_slots(parent, 1) == []  # parent is now the sole owner
    assert bm.blocks[shared_partial].ref_count == 1
    bm.check_integrity([parent, child])
    finish(bm, parent)
    finish(bm, child)
    assert bm.num_free_blocks == 8


def test_cache_salt_separates_tenants() -> None:
    bm = BlockManager(8, BS)
    tokens = list(range(9))
    a = make_seq(tokens, salt="tenant-a")
    prefill(bm, a)
    finish(bm, a)
    assert bm.match_prefix(make_seq(tokens, salt="tenant-b")).num_cached_tokens == 0
    assert bm.match_prefix(make_seq(tokens)).num_cached_tokens == 0
    assert bm.match_prefix(make_seq(tokens, salt="tenant-a")).num_cached_tokens == 8


def test_collision_guard_rejects_mismatched_tokens() -> None:
    bm = BlockManager(4, BS)
    a = make_seq(list(range(5)))
    prefill(bm, a)
    # Simulate a hash collision: the table entry's stored tokens differ from the query's.
    bm.blocks[a.block_table[0]].token_ids = (9, 9, 9, 9)
    assert bm.match_prefix(make_seq(list(range(5)))).num_cached_tokens == 0


def test_out_of_blocks_changes_nothing() -> None:
    bm = BlockManager(3, BS)
    a = make_seq(list(range(9)))
    prefill(bm, a)
    b = make_seq([7] * 8)
    before = (bm.num_free_blocks, bm.prefix_cache_queries_tokens)
    with pytest.raises(OutOfBlocksError, match="need 2 free KV blocks"):
        bm.allocate(b, bm.match_prefix(b), 8)
    assert b.block_table == [] and (bm.num_free_blocks, bm.prefix_cache_queries_tokens) == before
    a.append_token(1)
    a.append_token(2)
    a.append_token(3)
    with pytest.raises(OutOfBlocksError):
        bm.append_slots(a, 4)  # positions 9..12 need a fourth block
    assert len(a.block_table) == 3
    bm.check_integrity([a])


def test_prefix_caching_off_never_hits() -> None:
    bm = BlockManager(8, BS, enable_prefix_caching=False)
    a = make_seq(list(range(9)))
    prefill(bm, a)
    finish(bm, a)
    assert prefill(bm, make_seq(list(range(9)))) == 0
    assert bm.prefix_cache_queries_tokens == 0 and bm.num_cached_blocks == 0


def test_reset_prefix_cache() -> None:
    bm = BlockManager(8, BS)
    a = make_seq(list(range(9)))
    prefill(bm, a)
    bm.reset_prefix_cache()
    assert bm.match_prefix(make_seq(list(range(9)))).num_cached_tokens == 0
    bm.check_integrity([a])


def test_swap_out_and_in_round_trip() -> None:
    bm = BlockManager(4, BS, num_cpu_blocks=4)
    a = make_seq(list(range(6)))
    prefill(bm, a)
    device_blocks = list(a.block_table)
    out = bm.swap_out(a)
    a.status = SequenceStatus.SWAPPED
    assert [src for src, _ in out] == device_blocks
    assert bm.num_free_blocks == 4 and bm.num_free_cpu_blocks == 2
    bm.check_integrity([a])
    back = bm.swap_in(a)
    a.status = SequenceStatus.RUNNING
    assert [src for src, _ in back] == [dst for _, dst in out]
    assert a.block_table == [dst for _, dst in back] and bm.num_free_cpu_blocks == 4
    bm.check_integrity([a])


def test_leak_after_finished_and_aborted() -> None:
    bm = BlockManager(16, BS)
    for i in range(20):
        done = make_seq([i % 3] * 7 + [i])
        prefill(bm, done)
        done.append_token(1)
        bm.append_slots(done, 1)
        bm.mark_computed(done, 1)
        finish(bm, done)
        aborted = make_seq([i % 3] * 7 + [i, 5, 5, 5])
        prefill(bm, aborted, upto=5)  # aborted mid-prefill
        finish(bm, aborted)
    assert bm.num_free_blocks == 16 and bm.num_used_blocks == 0
    bm.check_integrity([])


class BlockManagerMachine(RuleBasedStateMachine):
    """Random admit / compute / decode / fork / finish / abort / swap sequences."""

    @initialize(num_blocks=st.integers(2, 12), num_cpu_blocks=st.integers(0, 6))
    def setup(self, num_blocks: int, num_cpu_blocks: int) -> None:
        self.bm = BlockManager(num_blocks, BS, num_cpu_blocks=num_cpu_blocks)
        self.live: list[Sequence] = []

    def running(self) -> list[Sequence]:
        return [s for s in self.live if s.status is SequenceStatus.RUNNING]

    @rule(
        prefix=st.sampled_from([[], [1, 2, 3, 4], [1, 2, 3, 4, 5, 6, 7, 8]]),
        tail=st.lists(st.integers(0, 3), min_size=1, max_size=9),
        salt=st.sampled_from([None, "t"]),
        chunk=st.integers(1, 12),
    )
    def admit(self, prefix: list[int], tail: list[int], salt: str | None, chunk: int) -> None:
        seq = make_seq(prefix + tail, salt=salt)
        match = self.bm.match_prefix(seq)
        assert self.bm.cached_prefix_tokens(seq) == match.num_cached_tokens
        chunk = min(chunk, seq.num_tokens - match.num_cached_tokens)
        try:
            self.bm.allocate(seq, match, chunk)
        except OutOfBlocksError:
            assert not self.bm.can_allocate(seq, match, chunk)
            return
        seq.status = SequenceStatus.RUNNING
        self.live.append(seq)

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def compute(self, data: st.DataObject) -> None:
        seq = data.draw(st.sampled_from(self.running()))
        covered = min(len(seq.block_table) * BS, seq.num_tokens)
        if covered > seq.num_computed_tokens:
            self.bm.mark_computed(seq, covered - seq.num_computed_tokens)

    @precondition(lambda self: self.running())
    @rule(data=st.data(), token=st.integers(0, 3), num_new=st.integers(1, 5))
    def grow(self, data: st.DataObject, token: int, num_new: int) -> None:
        seq = data.draw(st.sampled_from(self.running()))
        if seq.num_computed_tokens == seq.num_tokens:
            seq.append_token(token)  # a decode step's sampled token
        num_new = min(num_new, seq.num_tokens - seq.num_computed_tokens)
        try:
            self.bm.append_slots(seq, num_new)
        except OutOfBlocksError:
            assert not self.bm.can_append_slots(seq, num_new)

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        parent = data.draw(st.sampled_from(self.running()))
        self.live.append(self.bm.fork(parent, 1))

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def finish_or_abort(self, data: st.DataObject) -> None:
        seq = data.draw(st.sampled_from(self.live))
        self.bm.free(seq)
        seq.status = SequenceStatus.FINISHED
        self.live.remove(seq)

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def swap_out(self, data: st.DataObject) -> None:
        seq = data.draw(st.sampled_from(self.running()))
        if self.bm.can_swap_out(seq):
            self.bm.swap_out(seq)
            seq.status = SequenceStatus.SWAPPED

    @precondition(lambda self: any(s.status is SequenceStatus.SWAPPED for s in self.live))
    @rule(data=st.data())
    def swap_in(self, data: st.DataObject) -> None:
        swapped = [s for s in self.live if s.status is SequenceStatus.SWAPPED]
        seq = data.draw(st.sampled_from(swapped))
        if self.bm.can_swap_in(seq, 0):
            self.bm.swap_in(seq)
            seq.status = SequenceStatus.RUNNING

    @invariant()
    def integrity(self) -> None:
        if hasattr(self, "bm"):
            self.bm.check_integrity(self.live)
            assert self.bm.num_free_blocks + self.bm.num_used_blocks == self.bm.num_blocks

    def teardown(self) -> None:
        if hasattr(self, "bm"):
            for seq in self.live:
                self.bm.free(seq)
                seq.status = SequenceStatus.FINISHED
            assert self.bm.num_free_blocks == self.bm.num_blocks  # no leaks after aborting all
            assert self.bm.num_free_cpu_blocks == self.bm.num_cpu_blocks


BlockManagerMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, derandomize=True
)
test_block_manager_state_machine = BlockManagerMachine.TestCase
