"""Scheduler: chunked prefill, decode first, preemption without deadlock, cache-aware order, abort.

The scheduler is driven by `ListKVRunner`, a pure-Python stand-in for the model runner: it keeps
a KV "pool" of Python lists, applies swap/copy plans, stores one entry per new token at its slot
(a fingerprint of the token's whole prefix, as real K/V depend on it), then reads each sequence's
context back through its block table and checks it. So a wrong slot mapping, a stale prefix-cache
hit, a missed copy-on-write or a bad swap mapping fails the test. Its "model" is a fixed function
of the context (greedy-like), so runs under different pools and budgets must give equal outputs.
"""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.engine.config import EngineConfig
from promptcache.engine.sampling_params import SamplingParams
from promptcache.engine.scheduler import ScheduledBatch, Scheduler
from promptcache.engine.sequence import Sequence, SequenceStatus
from promptcache.errors import ConfigError, InvalidRequestError

BS = 4
VOCAB = 50


class ListKVRunner:
    """Executes a ScheduledBatch against a KV pool made of Python lists (see module docstring)."""

    def __init__(self, scheduler: Scheduler) -> None:
        bm = scheduler.block_manager
        self.bs = bm.block_size
        self.kv: list[list[object]] = [[None] * self.bs for _ in range(bm.num_blocks)]
        self.cpu: list[list[object]] = [[None] * self.bs for _ in range(bm.num_cpu_blocks)]

    def execute(self, batch: ScheduledBatch) -> list[int]:
        for src, dst in batch.blocks_to_swap_out:
            self.cpu[dst] = list(self.kv[src])
        for src, dst in batch.blocks_to_copy:
            self.kv[dst] = list(self.kv[src])
        for src, dst in batch.blocks_to_swap_in:
            self.kv[dst] = list(self.cpu[src])
        slots = batch.slot_mapping()
        assert len(slots) == len(set(slots)) == batch.num_scheduled_tokens
        for entry in batch.seqs:  # store every new token first, as a layer does
            tokens = entry.seq.token_ids
            for pos, slot in zip(entry.positions(), entry.slot_mapping(self.bs), strict=True):
                self.kv[slot // self.bs][slot % self.bs] = tuple(tokens[: pos + 1])
        sampled = []
        for entry in batch.seqs:  # then attend: read the whole context back
            seq = entry.seq
            table = seq.block_table
            context = [self.kv[table[p // self.bs]][p % self.bs] for p in range(entry.context_len)]
            expected = [tuple(seq.token_ids[: p + 1]) for p in range(entry.context_len)]
            assert context == expected, f"KV cache corrupted for {seq!r}"
            if entry.samples:
                sampled.append(
                    (sum(seq.token_ids) * 31 + seq.num_tokens + seq.sample_index) % VOCAB
                )
        return sampled


def make_scheduler(num_blocks: int = 64, **overrides: object) -> Scheduler:
    settings: dict[str, object] = {"max_model_len": 64, "block_size": BS}
    settings.update(overrides)
    return Scheduler(EngineConfig(**settings), num_blocks)


def add(
    sched: Scheduler, request_id: str, prompt: list[int], max_tokens: int = 4, **params: object
) -> Sequence:
    seq = Sequence(request_id, prompt, SamplingParams(max_tokens=max_tokens, **params))
    sched.add(seq)
    return seq


def step(sched: Scheduler, runner: ListKVRunner) -> ScheduledBatch:
    batch = sched.schedule()
    sched.postprocess(batch, runner.execute(batch))
    sched.check_integrity()
    return batch


def run_to_completion(sched: Scheduler, runner: ListKVRunner, max_steps: int = 2000) -> int:
    for steps in range(1, max_steps + 1):
        step(sched, runner)
        if not sched.has_unfinished():
            return steps
    raise AssertionError(f"not finished after {max_steps} steps: {sched.stats()}")


def test_chunked_prefill_under_tiny_token_budget() -> None:
    sched = make_scheduler(max_num_batched_tokens=8)
    runner = ListKVRunner(sched)
    seq = add(sched, "a", list(range(30)), max_tokens=2)
    plans = []
    while sched.has_unfinished():
        batch = step(sched, runner)
        plans.append(
            [(e.num_computed_tokens, e.num_scheduled_tokens, e.samples) for e in batch.seqs]
        )
    assert plans == [
        [(0, 8, False)],
        [(8, 8, False)],
        [(16, 8, False)],
        [(24, 6, True)],
        [(30, 1, True)],
    ]
    assert seq.finish_reason == "length" and seq.num_output_tokens == 2


def test_no_chunking_schedules_whole_prompts_only() -> None:
    sched = make_scheduler(max_num_batched_tokens=64, enable_chunked_prefill=False)
    runner = ListKVRunner(sched)
    add(sched, "a", list(range(40)))
    add(sched, "b", list(range(100, 140)))  # does not fit next to "a" this step
    batch = step(sched, runner)
    assert [(e.seq.request_id, e.num_scheduled_tokens) for e in batch.seqs] == [("a", 40)]
    batch = step(sched, runner)
    assert [(e.seq.request_id, e.num_scheduled_tokens) for e in batch.seqs] == [("a", 1), ("b", 40)]


def test_chunking_off_needs_budget_for_max_model_len() -> None:
    with pytest.raises(ConfigError, match="max_num_batched_tokens"):
        EngineConfig(max_model_len=64, max_num_batched_tokens=32, enable_chunked_prefill=False)


def test_decode_first_then_prefill_chunk() -> None:
    sched = make_scheduler(max_num_batched_tokens=6)
    runner = ListKVRunner(sched)
    for i in range(3):
        add(sched, f"d{i}", [i + 1, 7], max_tokens=10)
    step(sched, runner)  # three 2-token prefills
    add(sched, "p", list(range(10, 22)), max_tokens=10)
    batch = step(sched, runner)
    summary = [(e.seq.request_id, e.is_prefill, e.num_scheduled_tokens) for e in batch.seqs]
    assert summary == [("d0", False, 1), ("d1", False, 1), ("d2", False, 1), ("p", True, 3)]
    assert batch.phase == "prefill" and len(batch.decode_seqs) == 3
    batch = step(sched, runner)  # decodes still go first while "p" is mid-prefill
    assert [e.seq.request_id for e in batch.seqs] == ["d0", "d1", "d2", "p"]
    assert batch.seqs[-1].num_computed_tokens == 3


def random_workload(sched: Scheduler, seed: int, num_requests: int = 12) -> list[Sequence]:
    rng = random.Random(seed)
    shared = [rng.randrange(VOCAB) for _ in range(10)]
    seqs = []
    for i in range(num_requests):
        prompt = shared[: rng.randrange(0, 11)] + [
            rng.randrange(VOCAB) for _ in range(rng.randrange(1, 14))
        ]
        n = 2 if i % 5 == 4 else 1
        seqs.append(
            add(sched, f"r{i}", prompt, max_tokens=rng.randrange(1, 12), n=n, ignore_eos=True)
        )
    return seqs


def drain(sched: Scheduler) -> tuple[dict[tuple[str, int], list[int]], list[ScheduledBatch]]:
    """Run until idle, checking invariants each step; outputs per (request, sample) + batches."""
    runner = ListKVRunner(sched)
    finished: dict[tuple[str, int], list[int]] = {}
    batches = []
    for _ in range(2000):
        batch = sched.schedule()
        for seq in sched.postprocess(batch, runner.execute(batch)):
            if seq.is_finished:
                finished[(seq.request_id, seq.sample_index)] = seq.output_token_ids
        sched.check_integrity()
        batches.append(batch)
        if not sched.has_unfinished():
            return finished, batches
    raise AssertionError(f"not finished after 2000 steps: {sched.stats()}")


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_preemption_under_tiny_pool_finishes_everything(mode: str) -> None:
    roomy = make_scheduler(num_blocks=256, max_num_batched_tokens=16)
    random_workload(roomy, seed=7)
    expected, _ = drain(roomy)
    assert roomy.stats().num_preemptions == 0

    tiny = make_scheduler(
        num_blocks=7, max_num_batched_tokens=16, preemption_mode=mode, num_cpu_blocks=8
    )
    requests = random_workload(tiny, seed=7)
    finished, batches = drain(tiny)
    assert finished == expected  # same tokens as without preemption
    assert len(finished) == sum(s.params.n for s in requests)
    assert tiny.stats().num_preemptions > 0
    swaps = sum(len(b.blocks_to_swap_out) + len(b.blocks_to_swap_in) for b in batches)
    assert (swaps > 0) == (mode == "swap")
    assert tiny.block_manager.num_free_blocks == 7
    assert tiny.block_manager.num_free_cpu_blocks == tiny.block_manager.num_cpu_blocks


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 10_000),
    num_blocks=st.integers(9, 14),
    budget=st.integers(1, 16),
    max_num_seqs=st.integers(2, 5),
    mode=st.sampled_from(["recompute", "swap"]),
    cache_aware=st.booleans(),
)
def test_random_tight_configs_finish_with_reference_tokens(
    seed: int, num_blocks: int, budget: int, max_num_seqs: int, mode: str, cache_aware: bool
) -> None:
    roomy = make_scheduler(num_blocks=256, max_num_batched_tokens=64)
    random_workload(roomy, seed=seed, num_requests=8)
    expected, _ = drain(roomy)
    tight = make_scheduler(
        num_blocks=num_blocks,
        max_num_batched_tokens=budget,
        max_num_seqs=max_num_seqs,
        preemption_mode=mode,
        num_cpu_blocks=4,
        cache_aware_scheduling=cache_aware,
        fairness_max_wait_steps=2,
    )
    random_workload(tight, seed=seed, num_requests=8)
    finished, _ = drain(tight)
    assert finished == expected
    assert tight.block_manager.num_free_blocks == num_blocks


def test_preemption_picks_the_newest_request() -> None:
    sched = make_scheduler(num_blocks=4, max_model_len=16)
    runner = ListKVRunner(sched)
    old = add(sched, "old", [1] * 7, max_tokens=8)
    new = add(sched, "new", [2] * 7, max_tokens=4)
    step(sched, runner)  # both prefilled: 2 blocks each, pool full
    step(sched, runner)  # both decode position 7 inside their second block
    batch = step(sched, runner)  # "old" needs a third block: "new" gives its blocks up
    assert batch.preempted == [new] and new.status is SequenceStatus.WAITING
    assert [e.seq for e in batch.seqs] == [old] and new.num_computed_tokens == 0
    run_to_completion(sched, runner)
    assert (old.finish_reason, new.finish_reason) == ("length", "length")


def test_samples_share_prompt_blocks_copy_on_write() -> None:
    sched = make_scheduler()
    runner = ListKVRunner(sched)
    parent = add(sched, "n3", list(range(1, 11)), max_tokens=3, n=3)
    batch = step(sched, runner)  # prefill all but the last prompt token
    assert [(e.num_scheduled_tokens, e.samples) for e in batch.seqs] == [(9, False)]
    batch = sched.schedule()  # fork: each sample computes the last prompt token itself
    samples = [e.seq for e in batch.seqs]
    assert [s.sample_index for s in samples] == [0, 1, 2] and samples[0] is parent
    assert len({s.block_table[0] for s in samples}) == 1  # full prompt blocks shared
    assert len({s.block_table[2] for s in samples}) == 3  # the partial block was copied
    assert len(batch.blocks_to_copy) == 2
    sched.postprocess(batch, runner.execute(batch))
    sched.check_integrity()
    run_to_completion(sched, runner)
    assert len({tuple(s.output_token_ids) for s in samples}) == 3
    assert sched.block_manager.num_free_blocks == 64


def test_cache_aware_ordering_prefers_longest_cached_prefix() -> None:
    sched = make_scheduler(max_num_seqs=1, fairness_max_wait_steps=100)
    runner = ListKVRunner(sched)
    prefix = list(range(1, 13))
    add(sched, "warm", [*prefix, 40], max_tokens=1)
    run_to_completion(sched, runner)
    add(sched, "cold", [30, 31, 32, 33, 34], max_tokens=1)
    hot = add(sched, "hot", [*prefix, 41], max_tokens=1)
    batch = sched.schedule()
    assert [e.seq.request_id for e in batch.seqs] == ["hot"]
    assert batch.seqs[0].num_computed_tokens == 12 and batch.seqs[0].num_scheduled_tokens == 1
    assert hot.num_cached_tokens == 12


def test_fcfs_when_cache_aware_scheduling_is_off() -> None:
    sched = make_scheduler(max_num_seqs=1, cache_aware_scheduling=False)
    runner = ListKVRunner(sched)
    prefix = list(range(1, 13))
    add(sched, "warm", [*prefix, 40], max_tokens=1)
    run_to_completion(sched, runner)
    add(sched, "cold", [30, 31, 32, 33, 34], max_tokens=1)
    add(sched, "hot", [*prefix, 41], max_tokens=1)
    assert [e.seq.request_id for e in sched.schedule().seqs] == ["cold"]


def test_fairness_bound_lets_an_old_request_go_first() -> None:
    sched = make_scheduler(max_num_seqs=1, fairness_max_wait_steps=3)
    runner = ListKVRunner(sched)
    prefix = list(range(1, 13))
    add(sched, "warm", [*prefix, 40], max_tokens=1)
    run_to_completion(sched, runner)
    add(sched, "cold", [30, 31, 32, 33, 34], max_tokens=1)
    order = []
    for i in range(8):
        add(sched, f"hot{i}", [*prefix, 41 + i], max_tokens=1)  # always a better cache match
        batch = step(sched, runner)
        order += [e.seq.request_id for e in batch.seqs if e.is_prefill]
    # waited 4 > 3 steps, then overtook the better-cached request of that step
    assert order[:5] == ["hot0", "hot1", "hot2", "cold", "hot3"]


def test_abort_frees_blocks_at_once() -> None:
    sched = make_scheduler(num_blocks=16, max_num_batched_tokens=8)
    runner = ListKVRunner(sched)
    running = add(sched, "run", list(range(20)))
    waiting = add(sched, "wait", list(range(50, 60)))
    step(sched, runner)
    assert running.status is SequenceStatus.RUNNING and len(running.block_table) == 2
    assert [s.request_id for s in sched.abort("run")] == ["run"]
    assert running.finish_reason == "abort" and running.block_table == []
    assert sched.block_manager.num_free_blocks == 16
    batch = sched.schedule()  # "wait" is planned and run, then aborted before postprocess
    sampled = runner.execute(batch)
    sched.abort("wait")
    assert sched.postprocess(batch, sampled) == []
    assert waiting.finish_reason == "abort" and not sched.has_unfinished()
    assert sched.abort("wait") == [] and sched.abort("unknown") == []
    sched.check_integrity()


def test_no_leak_after_finished_and_aborted_requests() -> None:
    sched = make_scheduler(num_blocks=24, max_num_batched_tokens=12)
    runner = ListKVRunner(sched)
    for i in range(10):
        add(sched, f"done{i}", [i % 3] * 6 + [i], max_tokens=3)
        add(sched, f"gone{i}", [i % 3] * 6 + [i, 1, 2], max_tokens=8, n=2)
        step(sched, runner)
        step(sched, runner)
        sched.abort(f"gone{i}")
    run_to_completion(sched, runner)
    bm = sched.block_manager
    assert bm.num_free_blocks == bm.num_blocks and bm.num_used_blocks == 0
    assert bm.prefix_cache_hits_tokens > 0


def test_stop_conditions() -> None:
    sched = Scheduler(EngineConfig(max_model_len=12, block_size=BS), 16, eos_token_ids=[9])
    eos = Sequence("eos", [1, 2], SamplingParams(max_tokens=5))
    ignore = Sequence("ignore", [1, 3], SamplingParams(max_tokens=2, ignore_eos=True))
    stop_id = Sequence("stop-id", [1, 4], SamplingParams(max_tokens=5, stop_token_ids=[7]))
    checker = Sequence("checker", [1, 5], SamplingParams(max_tokens=5))
    long = Sequence("long", list(range(10)), SamplingParams(max_tokens=50))
    for seq in (eos, ignore, stop_id, checker, long):
        sched.add(seq)
    batch = sched.schedule()
    assert [e.seq.request_id for e in batch.sampled_seqs] == [
        "eos",
        "ignore",
        "stop-id",
        "checker",
        "long",
    ]
    done = sched.postprocess(
        batch, [9, 9, 7, 3, 3], stop_checker=lambda s: s.request_id == "checker"
    )
    assert [(s.request_id, s.finish_reason, s.stop_reason) for s in done if s.is_finished] == [
        ("eos", "stop", 9),
        ("stop-id", "stop", 7),
        ("checker", "stop", None),
    ]
    batch = sched.schedule()
    sched.postprocess(batch, [9, 3])
    assert ignore.finish_reason == "length" and ignore.output_token_ids == [9, 9]
    assert long.num_tokens == 12 and long.finish_reason == "length"  # max_model_len
    with pytest.raises(ValueError, match="one id per"):
        sched.postprocess(sched.schedule(), [1])


@pytest.mark.parametrize(
    ("prompt", "params", "message"),
    [
        ([], {}, "prompt is empty"),
        (list(range(64)), {}, "max_model_len is 64"),
        ([1], {"n": 65}, "exceeds max_num_seqs"),
        (list(range(40)), {"max_tokens": 20}, "pool has 12"),
    ],
)
def test_add_rejects_bad_requests(
    prompt: list[int], params: dict[str, object], message: str
) -> None:
    sched = make_scheduler(num_blocks=12)
    with pytest.raises(InvalidRequestError, match=message):
        sched.add(Sequence("x", prompt, SamplingParams(**params)))


def test_duplicate_request_id_rejected() -> None:
    sched = make_scheduler()
    add(sched, "same", [1, 2])
    with pytest.raises(InvalidRequestError, match="already in flight"):
        add(sched, "same", [3, 4])


def test_warm_run_reports_cached_tokens_and_counters() -> None:
    sched = make_scheduler()
    runner = ListKVRunner(sched)
    first = add(sched, "a", list(range(1, 20)), max_tokens=2)
    run_to_completion(sched, runner)
    second = add(sched, "b", list(range(1, 20)), max_tokens=2)
    run_to_completion(sched, runner)
    assert first.num_cached_tokens == 0 and second.num_cached_tokens == 16
    stats = sched.stats()
    assert stats.prefix_cache_hits_tokens == 16 and stats.prefix_cache_queries_tokens == 38
    assert first.output_token_ids == second.output_token_ids


def test_block_manager_and_scheduler_never_import_torch() -> None:
    code = (
        "import sys\n"
        "import promptcache.engine.block_manager, promptcache.engine.scheduler\n"
        "import promptcache.engine.sequence, promptcache.engine.sampling_params\n"
        "import promptcache.engine.config\n"
        "heavy = sorted(m for m in ('torch', 'numpy', 'triton') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_request_sharing_an_in_flight_prefix_waits_one_step_for_the_cache_hit() -> None:
    # 36 shared prompt tokens = 9 blocks of 4: above IN_BATCH_SHARE_MIN_TOKENS (32)
    sched = make_scheduler(max_num_batched_tokens=200)
    runner = ListKVRunner(sched)
    system = list(range(1, 37))
    add(sched, "a", [*system, 40, 41], max_tokens=3)
    b = add(sched, "b", [*system, 42, 43], max_tokens=3)
    add(sched, "other", [7, 8, 9, 10, 11], max_tokens=3)
    first = step(sched, runner)
    assert [(e.seq.request_id, e.num_scheduled_tokens) for e in first.seqs] == [
        ("a", 38),
        ("other", 5),
    ]
    second = step(sched, runner)
    entry = next(e for e in second.seqs if e.seq.request_id == "b")
    assert (entry.num_computed_tokens, entry.num_scheduled_tokens) == (36, 2)
    assert b.num_cached_tokens == 36
    run_to_completion(sched, runner)
    # the same outputs as with the requests one at a time (ListKVRunner checks every read)
    alone = make_scheduler(max_num_batched_tokens=200)
    alone_runner = ListKVRunner(alone)
    again = add(alone, "b", [*system, 42, 43], max_tokens=3)
    run_to_completion(alone, alone_runner)
    assert b.output_token_ids == again.output_token_ids


def test_a_short_shared_prefix_is_computed_in_the_same_step() -> None:
    sched = make_scheduler(max_num_batched_tokens=200)
    runner = ListKVRunner(sched)
    system = list(range(1, 29))  # 28 tokens: under IN_BATCH_SHARE_MIN_TOKENS
    add(sched, "a", [*system, 40], max_tokens=2)
    add(sched, "b", [*system, 41], max_tokens=2)
    assert [e.seq.request_id for e in step(sched, runner).seqs] == ["a", "b"]


def test_in_batch_deferral_waits_for_a_chunked_prefill_to_finish_its_blocks() -> None:
    # a's 48-token prompt takes two 24-token chunks; b shares it and waits, then hits all 44
    # full-block tokens a computed (the last prompt token is always recomputed)
    sched = make_scheduler(max_num_batched_tokens=24)
    runner = ListKVRunner(sched)
    prompt = list(range(1, 49))
    add(sched, "a", prompt, max_tokens=2)
    b = add(sched, "b", [*prompt[:44], 45, 46, 47, 49], max_tokens=2)
    steps = [step(sched, runner) for _ in range(3)]
    assert [[e.seq.request_id for e in s.seqs] for s in steps[:2]] == [["a"], ["a"]]
    assert b.num_cached_tokens == 44
    run_to_completion(sched, runner)
    assert b.is_finished
