"""The prefix policy's index, its chunk hashes and its choices, on their own (a fake clock for
the TTL)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.fingerprint import fingerprint_request, prompt_texts
from promptcache.proxy.routing import Replica, RequestFacts, RoutingSettings
from promptcache.proxy.routing.chunks import CHUNK_CHARS, chunk_ends, chunk_hashes, chunked_prompt
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


def test_insert_keeps_each_replicas_chains_prefix_closed_under_eviction() -> None:
    index = PrefixIndex(max_prefixes=5, ttl_s=60)
    index.insert(0, ["a", "a1", "a2", "a3"])
    index.insert(0, ["b", "b1", "b2"])  # 7 > 5: the two oldest go, the deep end of chain a
    assert index.depths(["a", "a1", "a2", "a3"], [0]) == {0: 2}
    assert index.depths(["b", "b1", "b2", "b3"], [0]) == {0: 3}


def test_depths_gives_every_candidates_leading_run() -> None:
    index = PrefixIndex(max_prefixes=100, ttl_s=60)
    chain = [f"c{i}" for i in range(37)]
    index.insert(0, chain[:5])
    index.insert(1, chain[:36])
    assert index.depths(chain, [0, 1, 2]) == {0: 5, 1: 36, 2: 0}
    assert index.depths(chain[:1], [0, 1, 2]) == {0: 1, 1: 1, 2: 0}
    assert index.depths([], [0]) == {0: 0}


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
    # replica 0 and 1 each hold the last 8 distinct hashes they were sent (each chain deepest
    # first)
    for replica in (0, 1):
        sent: list[str] = []
        for chain in requests[replica::2]:
            for h in map(str, reversed(chain)):
                if h in sent:
                    sent.remove(h)
                sent.append(h)
        for h in sent[-8:]:
            assert index.longest_match([h], {replica}) == (1, [replica])
        for h in sent[:-8]:
            assert index.longest_match([h], {replica}) == (0, [])


def test_held_since_is_the_first_insert_of_an_unbroken_hold() -> None:
    clock = Clock()
    index = PrefixIndex(max_prefixes=3, ttl_s=10, clock=clock)
    index.insert(0, ["a", "a-b"])
    clock.now = 5.0
    index.insert(0, ["a", "a-b"])  # refreshed: still held since 0
    index.insert(1, ["a"])
    assert (index.held_since(0, "a"), index.held_since(0, "a-b"), index.held_since(1, "a")) == (
        0.0, 0.0, 5.0,
    )  # fmt: skip
    assert index.held_since(1, "a-b") == index.held_since(2, "a") == math.inf
    clock.now = 15.5  # replica 0's entries expired: inserted again, held since now
    index.insert(0, ["a"])
    assert index.held_since(0, "a") == 15.5 and index.held_since(0, "a-b") == math.inf
    index.insert(2, ["a"])
    index.insert(2, ["x", "x-y", "x-z"])  # 3 at most per replica: replica 2's "a" is evicted
    clock.now = 16.0
    index.insert(2, ["a"])
    assert index.held_since(2, "a") == 16.0


def test_forgetting_a_replica_drops_its_prefixes_only() -> None:
    index = PrefixIndex(max_prefixes=10, ttl_s=60)
    index.insert(0, ["a"])
    index.insert(1, ["a", "b"])
    index.forget_replica(1)
    assert index.longest_match(["a", "b"], {0, 1}) == (1, [0]) and len(index) == 1


def test_chunk_hashes_are_shared_exactly_up_to_the_last_common_chunk() -> None:
    size = 8
    a = chunk_hashes("0123456789abcdefXYZ", size)
    b = chunk_hashes("0123456789abcdefXY", size)
    c = chunk_hashes("0123456789abcdeQ", size)
    assert len(a) == 3 and len(b) == 3 and len(c) == 2  # the last piece is shorter
    assert a[:2] == b[:2] and a[2] != b[2]
    assert c[0] == a[0] and c[1] != a[1]
    assert chunk_hashes("", size) == []
    # per piece: a piece boundary always starts a new chunk, and chains across pieces
    pieces = chunk_hashes(["0123456789", "abc"], size)
    assert len(pieces) == 3 and chunk_ends([10, 3], size) == [8, 10, 13]
    assert chunk_ends([16, 0, 1], size) == [8, 16, 17]
    # a chunk moved to another position is another prefix
    assert chunk_hashes(["abcdefgh", "ABCDEFGH"], size)[1] != chunk_hashes(["ABCDEFGH"], size)[0]
    assert chunk_hashes(["xxxxxxxxxxxxxxxx"], size)[1] != chunk_hashes(["xxxxxxxx"], size)[0]
    assert pieces[0] == a[0] and pieces[1] != a[1]
    assert chunk_hashes(["0123456789", "abd"], size)[:2] == pieces[:2]
    with pytest.raises(ValueError, match="chunk size"):
        chunk_hashes("x", 0)


def _body(system: str, *turns: str, api: str = "openai_chat") -> dict[str, Any]:
    if api == "openai_completions":
        return {"model": "m", "prompt": system}
    messages = [{"role": "system", "content": system}]
    messages += [{"role": "user" if i % 2 == 0 else "assistant", "content": t}
                 for i, t in enumerate(turns)]  # fmt: skip
    return {"model": "m", "messages": messages}


def _facts(body: dict[str, Any], api: str = "openai_chat") -> RequestFacts:
    return RequestFacts(api=api, model="m", fingerprint=fingerprint_request(body, api))


def _common(a: Sequence[object], b: Sequence[object]) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


DOCUMENT = "The quarterly report says revenue grew in every region but the north. " * 8


def test_a_prefix_shared_inside_one_message_matches_to_its_last_whole_chunk() -> None:
    one = _facts(_body("Answer from the document.", DOCUMENT + "Question: which region?"))
    two = _facts(_body("Answer from the document.", DOCUMENT + "Question: how much?"))
    assert one.fingerprint is not None and two.fingerprint is not None
    # message-level fingerprints share the system message only
    assert one.fingerprint.chained[0] == two.fingerprint.chained[0]
    assert one.fingerprint.chained[1] != two.fingerprint.chained[1]
    system = one.fingerprint.segments[0].text
    user_one, user_two = (f.segments[1].text for f in (one.fingerprint, two.fingerprint))
    common = _common(user_one, user_two)
    assert one.chunks is not None and two.chunks is not None
    shared = _common(one.chunks.hashes, two.chunks.hashes)
    system_chunks = -(-len(system) // CHUNK_CHARS)
    assert shared == system_chunks + common // CHUNK_CHARS  # the document, chunk by chunk
    assert common // CHUNK_CHARS > 8
    policy = PrefixPolicy(RoutingSettings())
    replicas = _replicas(0, 0)
    assert policy.choose(one, replicas).replica.index == 0
    decision = policy.choose(two, replicas)
    assert (decision.replica.index, decision.reason, decision.depth) == (0, "prefix", shared)
    other = _facts(_body("Answer from the document.", DOCUMENT.upper() + "Question: how much?"))
    assert policy.choose(other, replicas).depth == system_chunks  # the system message only


def test_tokens_at_is_the_prompts_tokens_pro_rata() -> None:
    facts = _facts(_body(DOCUMENT, api="openai_completions"), api="openai_completions")
    assert facts.fingerprint is not None
    chunks = chunked_prompt(facts.fingerprint)
    chars = len(facts.fingerprint.segments[0].text)
    assert chunks.tokens == facts.fingerprint.approx_prefix_tokens > 0
    assert chunks.tokens_at(0) == 0 and chunks.tokens_at(len(chunks.hashes)) == chunks.tokens
    assert chunks.tokens_at(3) == round(chunks.tokens * 3 * CHUNK_CHARS / chars)


def _replicas(*in_flight: int) -> list[Replica]:
    return [Replica(i, f"http://r{i}", in_flight=n) for i, n in enumerate(in_flight)]


def test_prompt_texts_give_the_fingerprints_chunks_and_count_tokens_only_when_read() -> None:
    body = _body("Answer from the document.", DOCUMENT + "Question: how much?", "It is.", "Why?")
    fingerprint = fingerprint_request(body, "openai_chat")
    counted: list[int] = []

    def count() -> int:
        counted.append(1)
        return fingerprint.approx_prefix_tokens

    texts = prompt_texts(body, "openai_chat")
    assert texts.texts == [s.text for s in fingerprint.segments]
    facts = RequestFacts(api="openai_chat", model="m", body=body, prompt=texts,
                         prompt_tokens=count)  # fmt: skip
    assert facts.chunks is not None and counted == []
    assert list(facts.chunks.hashes) == list(chunked_prompt(fingerprint).hashes)
    assert fingerprint_request(body, "openai_chat", texts) == fingerprint
    policy = PrefixPolicy(RoutingSettings())
    replicas = _replicas(0, 0)
    policy.choose(facts, replicas)
    decision = policy.choose(facts, replicas)  # a match: its tokens wait for settled()
    assert decision.reason == "prefix" and decision.best_tokens is None and counted == []
    settled = decision.settled()
    assert settled.best_tokens == settled.tokens == fingerprint.approx_prefix_tokens > 0
    assert counted == [1] and settled.pending is None and settled.settled() is settled
    # without prompt_tokens, the facts count them from the body
    plain = RequestFacts(api="openai_chat", model="m", body=body, prompt=texts)
    assert plain.chunks is not None and plain.chunks.tokens == fingerprint.approx_prefix_tokens


def test_prefix_policy_prefers_the_match_within_the_margin_then_the_least_loaded() -> None:
    policy = PrefixPolicy(RoutingSettings(load_margin=2))
    facts = _facts(_body("sys " * 40, "u"))
    assert facts.chunks is not None
    depth, tokens = len(facts.chunks.hashes), facts.chunks.tokens
    replicas = _replicas(0, 0, 0)
    first = policy.choose(facts, replicas)
    assert (first.replica.index, first.reason, first.depth) == (0, "new_prefix", 0)
    assert (first.best_tokens, first.tokens) == (0, 0)
    replicas[0].in_flight = 2  # 2 over the least loaded: still within the margin
    again = policy.choose(facts, replicas).settled()
    assert (again.replica.index, again.reason, again.depth, again.in_flight) == (
        0, "prefix", depth, 2,
    )  # fmt: skip
    assert again.best_tokens == again.tokens == tokens  # no regret
    replicas[0].in_flight = 3
    over = policy.choose(facts, replicas).settled()
    assert (over.replica.index, over.reason, over.depth, over.least_in_flight) == (
        1, "overloaded", depth, 0,
    )  # fmt: skip
    assert (over.best_tokens, over.tokens) == (tokens, 0)  # regret: all of it
    # replicas 0 and 1 now both hold it: replica 0 is still over the margin, replica 1 is not
    tie = policy.choose(facts, replicas)
    assert (tie.replica.index, tie.reason) == (1, "prefix")
    # once replica 0 is back within the margin, the tie goes to it, the replica that has held
    # the prefix the longest, though replica 1 has fewer in flight and was routed fewer
    replicas[0].in_flight, replicas[0].routed = 1, 5
    home = policy.choose(facts, replicas).settled()
    assert (home.replica.index, home.reason, home.best_tokens, home.tokens) == (
        0, "prefix", tokens, tokens,
    )  # fmt: skip


def test_at_high_load_the_margin_moves_a_request_only_past_the_load_ratio() -> None:
    policy = PrefixPolicy(RoutingSettings(load_margin=2, load_ratio=2.0))
    facts = _facts(_body("sys " * 40, "u"))
    replicas = _replicas(0, 0, 0, 0)
    assert policy.choose(facts, replicas).replica.index == 0
    for r in replicas[1:]:
        r.in_flight = 10
    # 10 above the others' mean of 10 is past the margin, but not twice the mean: it stays
    replicas[0].in_flight = 20
    assert policy.choose(facts, replicas).reason == "prefix"
    replicas[0].in_flight = 21
    over = policy.choose(facts, replicas)
    assert (over.replica.index, over.reason) == (1, "overloaded")
    # beside idle replicas the margin alone decides
    policy = PrefixPolicy(RoutingSettings(load_margin=2, load_ratio=2.0))
    replicas = _replicas(0, 0, 0, 0)
    policy.choose(facts, replicas)
    replicas[0].in_flight = 3
    assert policy.choose(facts, replicas).reason == "overloaded"


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
