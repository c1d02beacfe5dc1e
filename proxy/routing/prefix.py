"""The ``prefix`` policy: route each request to the replica that most likely holds its prefix.

Like SGLang's cache-aware router and Ray Serve's ``PrefixCacheAffinityRouter``, the proxy keeps
an approximate index per replica of what it recently sent there: the chained hashes of the
request's prompt stream cut into 64-character chunks (``chunks.py``), so a prefix shared inside
one message (a RAG document followed by different questions, completions prompts with
different endings) finds its replica as well as a conversation's earlier turns do. A replica
that served a prefix most likely still holds its KV blocks; the index cannot see evictions, so
entries expire after ``prefix_ttl_s`` and each replica keeps at most ``max_prefixes`` chunk
hashes (least recently used dropped first).

Per request: each candidate's depth is the number of leading chunks it holds; the deepest wins
unless it is over its share of the load: more than ``load_margin`` requests in flight above the
mean of the other candidates, and more than ``load_ratio`` times that mean. Among equally deep
replicas within their share, the one that has held the matched prefix the longest wins (its
*home*), then the least loaded. When every deepest replica is over its share, the request goes
to the least loaded one instead (``overloaded``); a prefix no candidate holds goes to the least
loaded (``new_prefix``). The chosen replica then indexes every chunk of the request, at once,
so concurrent requests of a new prefix follow the first. The decision
carries the best candidate's matched tokens and the chosen one's (approximate: the prompt's
tokens pro rata of the matched characters), whose difference is the request's routing regret;
they need the prompt's token count, so they are computed when the decision is ``settled()``
(the proxy does so once the request went upstream), and choosing needs only the chunks' hashes.

Why the home and not the least loaded among equals: a request the load check sent elsewhere
leaves its prefix indexed on two replicas. Were ties broken by load, that one decision would
split the prefix's later requests between the two for as long as both entries live, though
neither is over its share: the prefix then takes cache on both replicas, each caching more
prefixes than it was given, and engines whose caches are sized for their share evict and
recompute. Load moves a request only through the load check; the home keeps the prefix where
it was, and the other copy serves only while the home is over its share (otherwise it ages out
of that engine's cache).

Why the other replicas' mean and not the least loaded one: leaving the holder costs the request
its prefix (recomputed elsewhere) and leaves a second copy in a second cache, so it should take
an imbalance of the fleet, not of one moment. Under an even load the least loaded replica is
the minimum over the fleet, which arrivals and completions push to 0 or 1 most of the time:
the holder was "above the least loaded by the margin" on noise, the more often the more
replicas there were. The others' mean moves little, so the holder leaves only when it carries
more than its share; with two replicas the mean is the other one. The ratio keeps the margin
meaningful at high load, where a fixed difference of a few requests is noise too (with the
defaults a replica with 100 requests in flight beside others at 64 keeps its prefixes, one with
129 does not); at low load the margin decides (a holder with more than ``load_margin`` in
flight beside idle replicas leaves).

The segment-level fingerprints (one hash per message) stay what the log and the cache-break
explainer use; only routing reads the chunks.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Sequence

from .chunks import ChunkedPrompt
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
    """Which replicas recently served which chained hashes; bounded, LRU + TTL.

    Args:
        max_prefixes: hashes kept per replica (a count); inserting more drops the least
            recently used.
        ttl_s: seconds after its last insert that a hash stops counting (and is dropped when
            next seen).
        clock: monotonic seconds; tests pass a fake one.

    The hashes of one request form a chain (``chained[i]`` stands for the prefix up to piece
    ``i``). ``insert`` refreshes a chain deepest first, so in each replica's LRU order a prefix
    is never older than its extensions: eviction and expiry drop a chain from its deep end and
    what a replica holds of a chain is always a leading run. ``depths`` relies on that and
    binary-searches each candidate's run (about ``log2(len(chained))`` lookups per candidate).

    Each entry keeps when it was last inserted (for the TTL) and since when the replica has held
    it without a break (``held_since``: an entry that expired or was evicted starts again).

    Memory: about 180 bytes per (hash, replica) entry (an ``OrderedDict`` item of an int and a
    tuple of two floats, measured with ``tracemalloc`` over entries inserted twice), so 4
    replicas x 20,000 chunks is about 14 MB.
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
        # replica -> hash -> (last inserted at, held since)
        self._lru: dict[int, OrderedDict[Hashable, tuple[float, float]]] = {}

    def __len__(self) -> int:
        """(hash, replica) entries held."""
        return sum(len(lru) for lru in self._lru.values())

    def size(self, replica: int) -> int:
        """Hashes held for ``replica``."""
        lru = self._lru.get(replica)
        return len(lru) if lru is not None else 0

    def insert(self, replica: int, chained: Sequence[Hashable]) -> None:
        """Note that ``replica`` now holds every prefix in ``chained`` (deepest refreshed
        first, so the shallowest is the most recently used)."""
        now = self.clock()
        oldest = now - self.ttl_s
        fresh = (now, now)
        lru = self._lru.get(replica)
        if lru is None:
            lru = self._lru[replica] = OrderedDict()
        to_end = lru.move_to_end
        get = lru.get
        for h in reversed(chained):
            held = get(h)
            lru[h] = fresh if held is None or held[0] < oldest else (now, held[1])
            to_end(h)
        for _ in range(len(lru) - self.max_prefixes):
            lru.popitem(last=False)

    def held_since(self, replica: int, h: Hashable) -> float:
        """Since when ``replica`` has held ``h`` without a break (its first insert since it was
        last expired or evicted); ``inf`` when it does not hold it."""
        lru = self._lru.get(replica)
        held = lru.get(h) if lru is not None else None
        if held is None or held[0] < self.clock() - self.ttl_s:
            return math.inf
        return held[1]

    def depths(self, chained: Sequence[Hashable], candidates: Collection[int]) -> dict[int, int]:
        """Per candidate, how many leading hashes of ``chained`` it holds (0 for none)."""
        oldest = self.clock() - self.ttl_s
        out = {}
        for replica in candidates:
            lru = self._lru.get(replica)
            lo, hi = 0, len(chained) if lru else 0  # it holds the first lo; not the first hi + 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                at = lru.get(chained[mid - 1]) if lru is not None else None
                if at is not None and at[0] >= oldest:
                    lo = mid
                else:
                    if at is not None and lru is not None:  # expired, as is the rest of the chain
                        for h in chained[mid - 1 :]:
                            lru.pop(h, None)
                    hi = mid - 1
            out[replica] = lo
        return out

    def longest_match(
        self, chained: Sequence[Hashable], candidates: Collection[int]
    ) -> tuple[int, list[int]]:
        """(depth, replicas): the most leading hashes of ``chained`` some candidate holds, and
        which candidates hold that many; (0, []) when none holds even the first."""
        depths = self.depths(chained, candidates)
        deepest = max(depths.values(), default=0)
        if deepest == 0:
            return 0, []
        return deepest, [r for r, d in depths.items() if d == deepest]

    def forget_replica(self, replica: int) -> None:
        """Drop everything ``replica`` held (it restarted or left: its cache is gone)."""
        self._lru.pop(replica, None)


class PrefixPolicy(Policy):
    """Prefix affinity over prompt chunks, with a load check (see the module docstring)."""

    name = "prefix"
    needs_fingerprint = False  # chunks only: the fingerprint waits until the request went out

    def __init__(self, settings: RoutingSettings, clock: Callable[[], float] = time.monotonic):
        self.load_margin = settings.load_margin
        self.load_ratio = settings.load_ratio
        self.index = PrefixIndex(settings.max_prefixes, settings.prefix_ttl_s, clock)

    def choose(self, facts: RequestFacts, candidates: Sequence[Replica]) -> Decision:
        least = least_loaded(candidates)
        chunks = facts.chunks
        if chunks is None or not chunks.hashes:
            return decide(least, "new_prefix", 0, candidates)
        depths = self.index.depths(chunks.hashes, [r.index for r in candidates])
        deepest = max(depths.values())
        if deepest == 0:
            decision = decide(least, "new_prefix", 0, candidates, 0, 0)
        else:
            # The tokens need the prompt's token count: left to ``Decision.settled``.
            over = self._over_share(candidates)
            holders = [r for r in candidates if depths[r.index] == deepest and not over(r)]
            if not holders:
                pending = _tokens_of(chunks, deepest, depths[least.index])
                decision = decide(least, "overloaded", deepest, candidates, pending=pending)
            else:
                best = holders[0] if len(holders) == 1 else self._home(holders, chunks, deepest)
                pending = _tokens_of(chunks, deepest, deepest)
                decision = decide(best, "prefix", deepest, candidates, pending=pending)
        self.index.insert(decision.replica.index, chunks.hashes)
        return decision

    def _over_share(self, candidates: Sequence[Replica]) -> Callable[[Replica], bool]:
        """Whether a replica is over its share of the load: more than ``load_margin`` requests
        in flight above the mean of the other candidates, and more than ``load_ratio`` times
        it. A lone candidate never is."""
        others = len(candidates) - 1
        total = sum(r.in_flight for r in candidates)
        margin, ratio = self.load_margin, self.load_ratio

        def over(replica: Replica) -> bool:
            if not others:
                return False
            mean = (total - replica.in_flight) / others
            return replica.in_flight - mean > margin and replica.in_flight > ratio * mean

        return over

    def _home(self, holders: Sequence[Replica], chunks: ChunkedPrompt, depth: int) -> Replica:
        """Of ``holders`` (each holding the first ``depth`` chunks), the one that has held the
        deepest of them the longest, then the least loaded."""
        h = chunks.hashes[depth - 1]
        since = self.index.held_since
        return min(holders, key=lambda r: (since(r.index, h), r.in_flight, r.routed))

    def replica_down(self, replica: Replica) -> None:
        self.index.forget_replica(replica.index)


def _tokens_of(chunks: ChunkedPrompt, best: int, chosen: int) -> Callable[[], tuple[int, int]]:
    """``Decision.pending`` for a match of ``best`` chunks, ``chosen`` of them held by the
    chosen replica: their approximate tokens, counted when first asked for."""
    return lambda: (chunks.tokens_at(best), chunks.tokens_at(chosen))


register_policy(
    PolicySpec(
        "prefix",
        lambda settings, replicas: PrefixPolicy(settings),
        needs="nothing beyond the OpenAI-compatible API; works best when the replicas cache "
        "prefixes automatically (our engine, vLLM --enable-prefix-caching, SGLang's radix cache)",
        reads=frozenset({"load_margin", "load_ratio", "prefix_ttl_s", "max_prefixes"}),
    )
)
