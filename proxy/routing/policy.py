"""The routing policy interface, the plain policies and the registry of policy names.

A policy is an object with ``choose(facts, candidates) -> Decision``. The ``Router``
(``router.py``) owns the replicas, their health and their in-flight counts; it calls ``choose``
with the replicas in rotation (healthy, and not already tried by this request) and tells the
policy when a replica leaves or rejoins the rotation. Policies are registered by name in
``POLICIES`` (a ``PolicySpec`` each), which is what ``policy = "..."`` in the config names.

Load everywhere is ``Replica.load``: (requests in flight, requests routed so far). The second
part breaks ties, so requests that arrive one at a time still spread over the replicas.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from promptcache.errors import ConfigError
from promptcache.fingerprint import PromptTexts, RequestFingerprint, fingerprint_request

from .chunks import ChunkedPrompt, chunked_prompt, chunked_texts

if TYPE_CHECKING:
    from .settings import RoutingSettings

__all__ = [
    "POLICIES",
    "TUNING_KEYS",
    "Decision",
    "LeastLoadedPolicy",
    "Policy",
    "PolicySpec",
    "Replica",
    "RequestFacts",
    "RoundRobinPolicy",
    "least_loaded",
    "make_policy",
    "register_policy",
]


@dataclass(frozen=True)
class RequestFacts:
    """What a policy may know about a request before it is sent.

    Attributes:
        api: the body's wire format (``openai_chat``, ``anthropic``...), None for bodiless routes.
        model: the requested model, or None.
        chained: the chained prefix hashes (``promptcache.fingerprint``): ``chained[i]`` is the
            hex SHA-256 of the prefix up to segment ``i`` (tools, system blocks, messages); empty
            when the body has no prefix, or for a policy whose ``reads_prompt`` or
            ``needs_fingerprint`` is False.
        body: the parsed JSON body (read-only), for policies that need the tokens themselves.
        fingerprint: the body's prefix fingerprint (segment texts included), or None; when
            set, ``chunks`` is cut from it.
        prompt: the body's prefix segments serialised but not hashed or counted
            (``promptcache.fingerprint.prompt_texts``), or None: what the proxy gives a policy
            whose ``reads_prompt`` is True, so that the whole fingerprint (SHA-256 chain, token
            counts) is computed after the request went upstream; ``chunks`` is cut from it
            when there is no ``fingerprint``.
        prompt_tokens: with ``prompt``, counts the prompt's approximate tokens when first
            needed (the proxy's keeps the fingerprint it computes for the log); None counts
            them with ``fingerprint_request(body, api, prompt)``.
    """

    api: str | None
    model: str | None
    chained: Sequence[str] = ()
    body: Mapping[str, Any] | None = None
    fingerprint: RequestFingerprint | None = None
    prompt: PromptTexts | None = None
    prompt_tokens: Callable[[], int] | None = None

    @functools.cached_property
    def chunks(self) -> ChunkedPrompt | None:
        """The prompt stream's chunk hashes (``chunks.py``), computed once; None without a
        fingerprint or prompt texts. Its ``tokens`` are counted only when read.

        A body's ``cache_salt`` (our engine's and vLLM's tenant isolation: requests with
        different salts never share KV blocks) is folded into every hash, so a prompt matches
        only the replicas that cached it under the same salt (or, unsalted, under none)."""
        chunks = self._unsalted_chunks()
        salt = self.body.get("cache_salt") if self.body is not None else None
        if chunks is None or not isinstance(salt, str) or not salt:
            return chunks
        mark = hash(("cache_salt", salt))
        chunks.hashes = [h ^ mark for h in chunks.hashes]
        return chunks

    def _unsalted_chunks(self) -> ChunkedPrompt | None:
        if self.fingerprint is not None:
            return chunked_prompt(self.fingerprint)
        prompt = self.prompt
        if prompt is None:
            return None
        count = self.prompt_tokens
        if count is None:
            body = self.body if self.body is not None else {}
            count = lambda: fingerprint_request(body, prompt.api, prompt).approx_prefix_tokens  # noqa: E731
        return chunked_texts(prompt.texts, count)


@dataclass(eq=False)
class Replica:
    """One replica of an upstream, as the router tracks it.

    Attributes:
        index: position in the upstream's ``replicas`` list (0-based).
        url: its base URL (``http://10.0.0.5:8000``), credentials masked.
        healthy: in rotation (last health check passed, no refused connection since).
        in_flight: requests sent to it whose response has not finished (a count).
        routed: requests routed to it since the proxy started.
        last_error: why it last left the rotation, or None.
    """

    index: int
    url: str
    healthy: bool = True
    in_flight: int = 0
    routed: int = 0
    last_error: str | None = None

    @property
    def load(self) -> tuple[int, int]:
        """(in flight, routed so far): compare replicas by it, smallest first."""
        return (self.in_flight, self.routed)


@dataclass(frozen=True)
class Decision:
    """Where one request goes, and why.

    Attributes:
        replica: the chosen replica.
        reason: ``prefix`` (the replica holding its longest prefix), ``new_prefix`` (no replica
            holds any of it: least loaded), ``overloaded`` (the matching replica was over its
            share of the load, ``load_margin`` and ``load_ratio``: least loaded),
            ``least_loaded``, ``round_robin``, ``kv_events`` (cached blocks); the router sets
            ``retry`` on a second attempt.
        depth: how much of the prefix the best-matching replica held: chunks of the prompt
            stream for ``prefix`` (``chunks.py``), KV blocks for ``kv_events``, 0 for none.
        in_flight: the chosen replica's requests in flight when it was chosen.
        least_in_flight: the fewest requests in flight of any candidate then.
        best_tokens: prompt tokens the best-matching candidate held (available), None when
            the policy does not know (``least_loaded``, ``round_robin``); exact for
            ``kv_events`` (blocks x block size), approximate for ``prefix`` (the prompt's
            approximate tokens pro rata of the matched characters).
        tokens: prompt tokens the chosen replica held (achieved); ``best_tokens - tokens`` is
            the request's routing regret.
        pending: when set, ``best_tokens`` and ``tokens`` are None until ``settled()``
            computes them with it: ``() -> (best_tokens, tokens)``. The ``prefix`` policy
            leaves them so, since they need the prompt's token count, which the request does
            not need before it is forwarded.
    """

    replica: Replica
    reason: str
    depth: int = 0
    in_flight: int = 0
    least_in_flight: int = 0
    best_tokens: int | None = None
    tokens: int | None = None
    pending: Callable[[], tuple[int, int]] | None = field(default=None, compare=False, repr=False)

    def settled(self) -> Decision:
        """This decision with ``best_tokens`` and ``tokens`` computed (itself when nothing is
        pending)."""
        if self.pending is None:
            return self
        best, chosen = self.pending()
        return replace(self, best_tokens=best, tokens=chosen, pending=None)


def least_loaded(candidates: Sequence[Replica]) -> Replica:
    """The candidate with the smallest ``load`` (the first such in list order)."""
    return min(candidates, key=_LOAD)


#: ``Replica.load`` in C (no Python call per candidate): the routers compare it per request.
_LOAD = operator.attrgetter("in_flight", "routed")
_IN_FLIGHT = operator.attrgetter("in_flight")


def decide(
    replica: Replica,
    reason: str,
    depth: int,
    candidates: Sequence[Replica],
    best_tokens: int | None = None,
    tokens: int | None = None,
    pending: Callable[[], tuple[int, int]] | None = None,
) -> Decision:
    """A ``Decision`` with the loads seen now among ``candidates``."""
    least = min(map(_IN_FLIGHT, candidates))
    return Decision(replica, reason, depth, replica.in_flight, least, best_tokens, tokens, pending)


class Policy:
    """Base class of routing policies; subclasses implement ``choose``.

    ``choose`` runs on the event loop for every request: it must be fast (tens of
    microseconds) and must not block. ``candidates`` is never empty.
    """

    name = "policy"
    #: whether ``choose`` reads the request's prompt fingerprint (``RequestFacts.chained``,
    #: ``fingerprint``, ``chunks``); when False the proxy leaves them empty and fingerprints the
    #: request for its log after the response instead of before forwarding
    reads_prompt = True
    #: with ``reads_prompt``, whether ``choose`` reads the fingerprint itself
    #: (``RequestFacts.chained``, ``fingerprint``); when False it reads only ``chunks``, and
    #: the proxy gives it the segments' texts (``RequestFacts.prompt``) and computes the
    #: fingerprint once the request went upstream
    needs_fingerprint = True
    #: whether the policy measures what each replica holds of a request (``route_best_tokens``
    #: / ``route_chosen_tokens``); when False it has no routing regret to report, not a zero one
    matches_prefixes = True

    def choose(self, facts: RequestFacts, candidates: Sequence[Replica]) -> Decision:
        """Pick one of ``candidates`` for the request described by ``facts``."""
        raise NotImplementedError

    def replica_down(self, replica: Replica) -> None:
        """``replica`` left the rotation (refused a connection, failed a health check)."""

    def replica_up(self, replica: Replica) -> None:
        """``replica`` is back in rotation."""

    async def start(self) -> None:
        """Called once when the proxy starts (open subscriptions, start tasks)."""

    async def aclose(self) -> None:
        """Called once when the proxy stops."""


class LeastLoadedPolicy(Policy):
    """Each request to the replica with the fewest requests in flight."""

    name = "least_loaded"
    reads_prompt = False
    matches_prefixes = False

    def choose(self, facts: RequestFacts, candidates: Sequence[Replica]) -> Decision:
        return decide(least_loaded(candidates), "least_loaded", 0, candidates)


class RoundRobinPolicy(Policy):
    """Each request to the next replica in list order (skipping those out of rotation)."""

    name = "round_robin"
    reads_prompt = False
    matches_prefixes = False

    def __init__(self) -> None:
        self._next = 0

    def choose(self, facts: RequestFacts, candidates: Sequence[Replica]) -> Decision:
        after = [r for r in candidates if r.index >= self._next]
        replica = after[0] if after else candidates[0]
        self._next = replica.index + 1
        return decide(replica, "round_robin", 0, candidates)


#: A policy factory: (settings, the replicas' URLs) -> a new policy.
PolicyFactory = Callable[["RoutingSettings", Sequence[str]], Policy]


@dataclass(frozen=True)
class PolicySpec:
    """A policy name the config accepts.

    Attributes:
        name: the ``policy = "..."`` value.
        factory: builds the policy for one upstream.
        needs: what the upstream must provide, for docs and error messages.
        keys: extra ``[upstreams.NAME]`` keys the policy reads (kept in
            ``RoutingSettings.options``).
        check: validates those keys (raises ``ConfigError``) given the settings and replica
            URLs; None accepts any values.
        reads: the tuning keys of ``RoutingSettings`` it reads (of ``TUNING_KEYS``); a table
            that sets another one for this policy is refused, since the value would do nothing.
    """

    name: str
    factory: PolicyFactory
    needs: str
    keys: frozenset[str] = frozenset()
    check: Callable[[RoutingSettings, Sequence[str]], None] | None = None
    reads: frozenset[str] = frozenset()


#: ``RoutingSettings`` keys that only some policies read (health checks apply to every policy).
TUNING_KEYS = frozenset({"load_margin", "load_ratio", "prefix_ttl_s", "max_prefixes"})


#: Registered policies by name.
POLICIES: dict[str, PolicySpec] = {}

#: Policy names the proxy knows of; one not registered here is missing from this build.
KNOWN_POLICIES = ("prefix", "least_loaded", "round_robin", "kv_events")


def register_policy(spec: PolicySpec) -> None:
    """Make ``spec.name`` a valid ``policy`` value."""
    POLICIES[spec.name] = spec


def policy_spec(name: object) -> PolicySpec:
    """The registered ``PolicySpec`` called ``name``.

    Raises:
        ConfigError: unknown name, or a known policy this build does not include.
    """
    spec = POLICIES.get(name) if isinstance(name, str) else None
    if spec is not None:
        return spec
    if name in KNOWN_POLICIES:
        raise ConfigError(
            f"routing policy {name!r} is not available in this promptcache build; use one of "
            f"{', '.join(sorted(POLICIES))}"
        )
    raise ConfigError(f"unknown routing policy {name!r}; use one of {', '.join(sorted(POLICIES))}")


def make_policy(settings: RoutingSettings, replicas: Sequence[str]) -> Policy:
    """A new policy object for one upstream (see ``POLICIES``).

    Raises:
        ConfigError: the policy name is not registered.
    """
    return policy_spec(settings.policy).factory(settings, replicas)


register_policy(
    PolicySpec(
        "least_loaded",
        lambda settings, replicas: LeastLoadedPolicy(),
        needs="nothing beyond the OpenAI-compatible API",
    )
)
register_policy(
    PolicySpec(
        "round_robin",
        lambda settings, replicas: RoundRobinPolicy(),
        needs="nothing beyond the OpenAI-compatible API",
    )
)
