"""The ``prefix`` policy: route each request to the replica that most likely holds its prefix.

Like SGLang's cache-aware router and Ray Serve's ``PrefixCacheAffinityRouter``, the proxy keeps
an approximate index per replica of what it recently sent there, here the request's chained
prefix hashes (``promptcache.fingerprint``: one per tools/system/message segment, each seeded
with the one before, as vLLM hashes KV blocks). A replica that served a prefix most likely still
holds its KV blocks; the index cannot see evictions, so entries expire after ``prefix_ttl_s`` and
each replica keeps at most ``max_prefixes`` of them (least recently used dropped first).

Per request: the deepest chained hash some candidate holds wins; among its holders the least
loaded. If that replica has more than ``load_margin`` requests in flight above the least loaded
candidate, the request goes to the least loaded one instead (``overloaded``); a prefix no
candidate holds goes to the least loaded (``new_prefix``). The chosen replica then indexes
every hash of the request, at once, so concurrent requests of a new prefix follow the first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence

from .policy import (
    Decision,
    Policy,
    PolicySpec,
    Replica,
    RequestFacts,
    decide,
    least_loaded,
    register_policy,
)
from .settings import RoutingSettings

__all__ = ["PrefixIndex", "PrefixPolicy"]


class PrefixIndex:
    """Which replicas recently served which chained prefix hashes; bounded, LRU + TTL.

    Args:
        max_prefixes: hashes kept per replica (a count); inserting more drops the least
            recently used.
        ttl_s: seconds after its last insert that a hash stops counting (and is dropped when
            next seen).
        clock: monotonic seconds; tests pass a fake one.

    Memory: about 250 bytes per (hash, replica) entry, so 4 replicas x 20,000 prefixes is about
    20 MB. ``longest_match`` costs one dict lookup per segment, from the deepest down.
    """

    def __init__(
        self,
        max_prefixes: int,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_prefixes = max_prefixes
        self.ttl_s = ttl_s
        self.clock = clock
        self._lru: dict[int, OrderedDict[str, float]] = {}  # replica -> hash -> inserted at
        self._holders: dict[str, dict[int, float]] = {}  # hash -> replica -> inserted at

    def __len__(self) -> int:
        """(hash, replica) entries held."""
        return sum(len(lru) for lru in self._lru.values())

    def size(self, replica: int) -> int:
        """Hashes held for ``replica``."""
        lru = self._lru.get(replica)
        return len(lru) if lru is not None else 0

    def insert(self, replica: int, chained: Sequence[str]) -> None:
        """Note that ``replica`` now holds every prefix in ``chained``."""
        now = self.clock()
        lru = self._lru.get(replica)
        if lru is None:
            lru = self._lru[replica] = OrderedDict()
        holders = self._holders
        for h in chained:
            if h in lru:
                lru.move_to_end(h)
            lru[h] = now
            entry = holders.get(h)
            if entry is None:
                holders[h] = {replica: now}
            else:
                entry[replica] = now
        while len(lru) > self.max_prefixes:
            old, _ = lru.popitem(last=False)
            self._drop(old, replica)

    def longest_match(
        self, chained: Sequence[str], candidates: Collection[int]
    ) -> tuple[int, list[int]]:
        """(depth, replicas): the most segments of ``chained`` some candidate holds, and which
        candidates hold that many; (0, []) when none holds even the first."""
        oldest = self.clock() - self.ttl_s
        holders = self._holders
        for depth in range(len(chained), 0, -1):
            entry = holders.get(chained[depth - 1])
            if entry is None:
                continue
            live = [r for r, at in entry.items() if at >= oldest and r in candidates]
            if live:
                return depth, live
            for r in [r for r, at in entry.items() if at < oldest]:
                self._forget(chained[depth - 1], r)
        return 0, []

    def forget_replica(self, replica: int) -> None:
        """Drop everything ``replica`` held (it restarted or left: its cache is gone)."""
        lru = self._lru.pop(replica, None)
        for h in lru or ():
            self._drop(h, replica)

    def _forget(self, h: str, replica: int) -> None:
        lru = self._lru.get(replica)
        if lru is not None:
            lru.pop(h, None)
        self._drop(h, replica)

    def _drop(self, h: str, replica: int) -> None:
        entry = self._holders.get(h)
        if entry is not None:
            entry.pop(replica, None)
            if not entry:
                del self._holders[h]


class PrefixPolicy(Policy):
    """Prefix affinity with a load check (see the module docstring)."""

    name = "prefix"

    def __init__(self, settings: RoutingSettings, clock: Callable[[], float] = time.monotonic):
        self.load_margin = settings.load_margin
        self.index = PrefixIndex(settings.max_prefixes, settings.prefix_ttl_s, clock)

    def choose(self, facts: RequestFacts, candidates: Sequence[Replica]) -> Decision:
        least = least_loaded(candidates)
        depth, holders = (
            self.index.longest_match(facts.chained, {r.index for r in candidates})
            if facts.chained
            else (0, [])
        )
        if not holders:
            decision = decide(least, "new_prefix", 0, candidates)
        else:
            best = least_loaded([r for r in candidates if r.index in holders])
            if best.in_flight - least.in_flight > self.load_margin:
                decision = decide(least, "overloaded", depth, candidates)
            else:
                decision = decide(best, "prefix", depth, candidates)
        if facts.chained:
            self.index.insert(decision.replica.index, facts.chained)
        return decision

    def replica_down(self, replica: Replica) -> None:
        self.index.forget_replica(replica.index)


register_policy(
    PolicySpec(
        "prefix",
        lambda settings, replicas: PrefixPolicy(settings),
        needs="nothing beyond the OpenAI-compatible API; works best when the replicas cache "
        "prefixes automatically (our engine, vLLM --enable-prefix-caching, SGLang's radix cache)",
    )
)
