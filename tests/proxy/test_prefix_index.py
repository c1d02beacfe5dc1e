"""The prefix policy's index and choices, on its own (a fake clock for the TTL)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.proxy.routing import Replica, RequestFacts, RoutingSettings
from promptcache.proxy.routing.policy import RoundRobinPolicy
from promptcache.proxy.routing.prefix import PrefixIndex, PrefixPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_longest_match_finds_the_deepest_prefix_a_candidate_holds() -> None:
    index = PrefixIndex(max_prefixes=100, ttl_s=60)
    index.insert(0, ["s", "s-u1"])
    index.insert(1, ["s", "s-u1", "s-u1-a1", "s-u1-a1-u2"])
    assert index.longest_match(["s", "s-u1", "s-u1-a1", "s-u1-a1-u2", "new"], {0, 1}) == (4, [1])
    assert index.longest_match(["s", "s-u1", "s-u1-a1"], {0}) == (2, [0])
    assert sorted(index.longest_match(["s", "other"], {0, 1})[1]) == [0, 1]
    assert index.longest_match(["x"], {0, 1}) == (0, [])


def test_entries_expire_after_the_ttl_and_are_dropped() -> None:
    clock = Clock()
    index = PrefixIndex(max_prefixes=100, ttl_s=10, clock=clock)
    index.insert(0, ["a", "a-b"])
    clock.now = 10.0
    assert index.longest_match(["a", "a-b"], {0}) == (2, [0])
    clock.now = 10.5
    assert index.longest_match(["a", "a-b"], {0}) == (0, [])
    assert len(index) == 0  # seen expired on the way down, so forgotten


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=6), max_size=40))
def test_each_replica_keeps_at_most_max_prefixes_the_most_recent(
    requests: list[list[int]],
) -> None:
    index = PrefixIndex(max_prefixes=8, ttl_s=1e9)
    for i, chain in enumerate(requests):
        index.insert(i % 2, [str(h) for h in chain])
        assert index.size(0) <= 8 and index.size(1) <= 8
    # replica 0 and 1 each hold the last 8 distinct hashes they were sent
    for replica in (0, 1):
        sent: list[str] = []
        for chain in requests[replica::2]:
            for h in map(str, chain):
                if h in sent:
                    sent.remove(h)
                sent.append(h)
        for h in sent[-8:]:
            assert index.longest_match([h], {replica}) == (1, [replica])
        for h in sent[:-8]:
            assert index.longest_match([h], {replica}) == (0, [])


def test_forgetting_a_replica_drops_its_prefixes_only() -> None:
    index = PrefixIndex(max_prefixes=10, ttl_s=60)
    index.insert(0, ["a"])
    index.insert(1, ["a", "b"])
    index.forget_replica(1)
    assert index.longest_match(["a", "b"], {0, 1}) == (1, [0]) and len(index) == 1


def _replicas(*in_flight: int) -> list[Replica]:
    return [Replica(i, f"http://r{i}", in_flight=n) for i, n in enumerate(in_flight)]


def test_prefix_policy_prefers_the_match_within_the_margin_then_the_least_loaded() -> None:
    policy = PrefixPolicy(RoutingSettings(load_margin=2))
    facts = RequestFacts(api="openai_chat", model="m", chained=["sys", "sys-u"])
    replicas = _replicas(0, 0, 0)
    first = policy.choose(facts, replicas)
    assert (first.replica.index, first.reason, first.depth) == (0, "new_prefix", 0)
    replicas[0].in_flight = 2  # 2 over the least loaded: still within the margin
    again = policy.choose(facts, replicas)
    assert (again.replica.index, again.reason, again.depth, again.in_flight) == (0, "prefix", 2, 2)
    replicas[0].in_flight = 3
    over = policy.choose(facts, replicas)
    assert (over.replica.index, over.reason, over.depth, over.least_in_flight) == (
        1, "overloaded", 2, 0,
    )  # fmt: skip
    # replicas 0 and 1 now both hold it: the tie goes to the less loaded
    tie = policy.choose(facts, replicas)
    assert (tie.replica.index, tie.reason) == (1, "prefix")


def test_no_prefix_goes_to_the_least_loaded_and_ties_to_the_fewest_routed() -> None:
    policy = PrefixPolicy(RoutingSettings())
    replicas = _replicas(1, 0, 0)
    replicas[1].routed = 5
    decision = policy.choose(RequestFacts(api=None, model=None), replicas)
    assert (decision.replica.index, decision.reason) == (2, "new_prefix")


def test_round_robin_skips_replicas_out_of_rotation() -> None:
    policy = RoundRobinPolicy()
    replicas = _replicas(0, 0, 0)
    facts = RequestFacts(api=None, model=None)
    picks = [policy.choose(facts, replicas).replica.index for _ in range(4)]
    assert picks == [0, 1, 2, 0]
    assert [policy.choose(facts, [replicas[0], replicas[2]]).replica.index for _ in range(3)] == [
        2, 0, 2,
    ]  # fmt: skip
