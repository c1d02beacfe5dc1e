"""The ``prefix`` policy: route each request to the replica that most likely holds its prefix.

Like SGLang's cache-aware router and Ray Serve's ``PrefixCacheAffinityRouter``, the proxy keeps
an approximate index per replica of what it recently sent there: the chained hashes of the
request's prompt stream cut into 64-character chunks (``chunks.py``), so a prefix shared inside
one message (a RAG document followed by different questions, completions prompts with
different endings) finds its replica as well as a conversation's earlier turns do. A replica
that served a prefix most likely still holds its KV blocks; the index cannot see evictions, so
entries expire after ``prefix_ttl_s`` and each replica keeps at most ``max_prefixes`` chunk
hashes (least recently used dropped first).

Per request: each candidate's depth is the number of leading chunks it holds; the deepest wins,
among equals the least loaded. If that replica has more than ``load_margin`` requests in flight
above the least loaded candidate, the request goes to the least loaded one instead
(``overloaded``); a prefix no candidate holds goes to the least loaded (``new_prefix``). The
chosen replica then indexes every chunk of the request, at once, so concurrent requests of a
new prefix follow the first. The decision carries the best candidate's matched tokens and the
chosen one's (approximate: the prompt's tokens pro rata of the matched characters), whose
difference is the request's routing regret; they need the prompt's token count, so they are
computed when the decision is ``settled()`` (the proxy does so once the request went upstream),
and choosing needs only the chunks' hashes.

The segment-level fingerprints (one hash per message) stay what the log and the cache-break
explainer use; only routing reads the chunks.
"""

from __future__ import annotations

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

    Memory: about 170 bytes per (hash, replica) entry (an ``OrderedDict`` item of an int and a
    float, measured with ``tracemalloc``), so 4 replicas x 20,000 chunks is about 14 MB.
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
        self._lru: dict[int, OrderedDict[Hashable, float]] = {}  # replica -> hash -> inserted at

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
        lru = self._lru.get(replica)
        if lru is None:
            lru = self._lru[replica] = OrderedDict()
        to_end = lru.move_to_end
        for h in reversed(chained):
            lru[h] = now
            to_end(h)
        for _ in range(len(lru) - self.max_prefixes):
            lru.popitem(last=False)

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
                if at is not None and at >= oldest:
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
            best = least_loaded([r for r in candidates if depths[r.index] == deepest])
            if best.in_flight - least.in_flight > self.load_margin:
                pending = _tokens_of(chunks, deepest, depths[least.index])
                decision = decide(least, "overloaded", deepest, candidates, pending=pending)
            else:
                pending = _tokens_of(chunks, deepest, deepest)
                decision = decide(best, "prefix", deepest, candidates, pending=pending)
        self.index.insert(decision.replica.index, chunks.hashes)
        return decision

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
    )
)
