"""The ``kv_events`` policy: route each request to the replica that holds most of its KV blocks.

Where ``prefix`` guesses from what it sent where, ``kv_events`` reads what each replica actually
holds, from the KV events the replicas publish (``promptcache engine serve
--kv-events-endpoint``; vLLM ``--kv-events-config``), followed by `KVEventFeed`
(``kv_index.py``, which also says what is exact and what is approximate). Per request:

- the body is tokenised as the engine would and hashed into blocks (`PromptHasher`);
- each candidate's depth is the number of leading blocks it holds, or has just been sent (a
  request routed in the last ``PENDING_TTL_S`` seconds whose blocks have not shown up in the
  events yet: concurrent requests of a new prefix follow the first);
- the deepest candidate wins; among equals, the one this prefix was last sent to (its "home":
  the most leading blocks last routed there; a bounded LRU map of ``max_prefixes`` block
  hashes), then the least loaded. A prefix whose blocks were evicted everywhere therefore goes
  back home (``affinity``) instead of spreading over the fleet, which keeps each replica's
  working set small;
- if the winner has more than ``load_margin`` requests in flight above the least loaded
  candidate, the request goes to the least loaded (``overloaded``); a prefix no replica holds
  and none was sent before goes to the least loaded (``new_prefix``; ``least_loaded`` while no
  replica has published any event yet), and so does a body that cannot be tokenised
  (``least_loaded``).

A replica that was sent requests of at least one full block ``SILENT_FEED_S`` seconds ago and has
published no KV event since the proxy started (a wrong ``kv_events_endpoints`` entry or
``kv_events_topic``, an engine started without ``--kv-events-endpoint``) is named in one warning
line, once: without its events the policy cannot know what it holds.

Each decision carries the deepest candidate's held tokens and the chosen one's (blocks x block
size): the request's routing regret is their difference, exact for our engine.

Config (``[upstreams.NAME]``, one endpoint per replica, in the order of ``replicas``)::

    [upstreams.fleet]
    replicas = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
    policy = "kv_events"
    kv_events_endpoints = ["tcp://127.0.0.1:5557", "tcp://127.0.0.1:5567"]
    kv_events_replay_endpoints = ["tcp://127.0.0.1:5558", "tcp://127.0.0.1:5568"]  # optional
    kv_events_topic = "kv-events"                     # optional; the engines' --kv-events-topic
    tokenizer = "../shared/models/tinystories-656k"   # the replicas' checkpoint directory
    chat_template = "chat.jinja"                      # optional; the replicas' --chat-template
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from promptcache.engine.kv_events import DEFAULT_TOPIC
from promptcache.errors import ConfigError

from ..redact import redact_url
from .kv_index import KVEventFeed, PromptHasher, ReplicaEndpoints
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

__all__ = ["PENDING_TTL_S", "SILENT_FEED_S", "KVEventsPolicy"]

logger = logging.getLogger("promptcache.proxy.routing")

V = TypeVar("V")

#: Seconds a routed request's blocks count as held by its replica before its events arrive.
PENDING_TTL_S = 10.0
#: Seconds after its first request of a full block by which a replica should have published a
#: KV event (ours and vLLM's publish within milliseconds of the prefill); else one warning.
SILENT_FEED_S = 15.0

_KEYS = frozenset(
    {
        "kv_events_endpoints",
        "kv_events_replay_endpoints",
        "kv_events_topic",
        "tokenizer",
        "chat_template",
    }
)


def _remember(entries: OrderedDict[int, V], hashes: Sequence[int], value: V, limit: int) -> None:
    """Set ``entries[h] = value`` for every hash as most recently used; keep ``limit``."""
    to_end = entries.move_to_end
    for h in hashes:
        entries[h] = value
        to_end(h)
    for _ in range(len(entries) - limit):
        entries.popitem(last=False)


class _Pending:
    """Blocks of requests just routed, per replica, until their events arrive (LRU + TTL)."""

    def __init__(self, limit: int, clock: Callable[[], float]) -> None:
        self.limit = limit
        self.clock = clock
        self._by_replica: dict[int, OrderedDict[int, float]] = {}

    def note(self, replica: int, hashes: Sequence[int]) -> None:
        entries = self._by_replica.setdefault(replica, OrderedDict())
        _remember(entries, hashes, self.clock() + PENDING_TTL_S, self.limit)

    def depth(self, replica: int, hashes: Sequence[int], beyond: int = 0) -> int:
        """How many leading ``hashes`` are pending on ``replica`` (a count); 0 when that count
        is not above ``beyond`` (the pending hash at index ``beyond`` is looked up first, so a
        replica that already holds ``beyond`` blocks pays one lookup when its pending blocks
        add none)."""
        entries = self._by_replica.get(replica)
        if not entries or len(hashes) <= beyond:
            return 0
        now = self.clock()
        get = entries.get
        if get(hashes[beyond], -math.inf) < now:
            return 0
        count = 0
        for h in hashes:  # a plain loop: about twice as fast as takewhile and a lambda
            if get(h, -math.inf) < now:
                break
            count += 1
        return count

    def forget(self, replica: int) -> None:
        self._by_replica.pop(replica, None)


class _Homes:
    """The replica each block hash was last sent to (one LRU map, ``limit`` hashes)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._replica: OrderedDict[int, int] = OrderedDict()

    def note(self, replica: int, hashes: Sequence[int]) -> None:
        _remember(self._replica, hashes, replica, self.limit)

    def depth(self, replica: int, hashes: Sequence[int]) -> int:
        """How many leading ``hashes`` were last sent to ``replica`` (a count)."""
        home, count = self.home(hashes)
        return count if home == replica else 0

    def home(self, hashes: Sequence[int]) -> tuple[int | None, int]:
        """(the replica the first hash was last sent to, or None; how many leading hashes were
        last sent to it): every other replica's `depth` is 0."""
        if not hashes:
            return None, 0
        get = self._replica.get
        home = get(hashes[0])
        if home is None:
            return None, 0
        count = 0
        for h in hashes:
            if get(h) != home:
                break
            count += 1
        return home, count

    def forget(self, replica: int) -> None:
        for h in [h for h, r in self._replica.items() if r == replica]:
            del self._replica[h]


class KVEventsPolicy(Policy):
    """Route by the KV blocks each replica holds (see the module docstring).

    Args:
        settings: the upstream's routing settings; ``options`` holds the keys above.
        replicas: the replicas' URLs (only their number is used).
        clock: monotonic seconds; tests pass a fake one.

    Raises:
        ConfigError: a missing or malformed key, or a tokenizer that cannot be loaded.
    """

    name = "kv_events"
    reads_prompt = False  # hashes the body's tokens itself

    def __init__(
        self,
        settings: RoutingSettings,
        replicas: Sequence[str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_options(settings, replicas)
        options = settings.options
        self.load_margin = settings.load_margin
        self.hasher = PromptHasher(str(options["tokenizer"]), _template(options))
        endpoints = options["kv_events_endpoints"]
        replay = options.get("kv_events_replay_endpoints") or [None] * len(endpoints)
        self.feed = KVEventFeed(
            [ReplicaEndpoints(e, r) for e, r in zip(endpoints, replay, strict=True)],
            topic=str(options.get("kv_events_topic", DEFAULT_TOPIC)),
        )
        self.pending = _Pending(settings.max_prefixes, clock)
        self.homes = _Homes(settings.max_prefixes)
        self._clock = clock
        self._topic = str(options.get("kv_events_topic", DEFAULT_TOPIC))
        #: replica -> [when it was first sent a request of a full block, requests since]
        self._unheard: dict[int, list[float]] = {}
        self._heard: set[int] = set()  # replicas that published an event, or were warned about

    async def start(self) -> None:
        await asyncio.to_thread(self.feed.start)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.feed.stop)

    def choose(self, facts: RequestFacts, candidates: Sequence[Replica]) -> Decision:
        least = least_loaded(candidates)
        hashes = None
        block_size = self.feed.block_size()
        if facts.body is not None:
            hashes = self.hasher.hashes(facts.api, facts.body, block_size)
        if hashes is None:
            return decide(least, "least_loaded", 0, candidates)
        salted, unsalted = hashes
        held: dict[int, int] = {}
        for r in candidates:
            blocks = self.feed.blocks[r.index].leading_blocks(salted, unsalted)
            held[r.index] = max(blocks, self.pending.depth(r.index, salted, blocks))
        most = max(held.values())
        leaders = [r for r in candidates if held[r.index] == most]
        if most and len(leaders) == 1:  # one deepest holder: the homes break no tie
            best = leaders[0]
            home = {}  # read only when the depth is 0
        else:
            home_replica, home_depth = self.homes.home(salted)
            home = {r.index: home_depth if r.index == home_replica else 0 for r in candidates}
            best = min(candidates, key=lambda r: (-held[r.index], -home[r.index], r.load))
        depth = held[best.index]
        available = depth * block_size
        if depth == 0 and home.get(best.index, 0) == 0:
            known = any(self.feed.blocks[r.index].num_batches for r in candidates)
            reason = "new_prefix" if known else "least_loaded"
            decision = decide(least, reason, 0, candidates, 0, 0)
        elif best.in_flight - least.in_flight > self.load_margin:
            tokens = held[least.index] * block_size
            decision = decide(least, "overloaded", depth, candidates, available, tokens)
        else:
            reason = "kv_events" if depth else "affinity"
            decision = decide(best, reason, depth, candidates, available, available)
        self.pending.note(decision.replica.index, salted)
        self.homes.note(decision.replica.index, salted)
        if salted and decision.replica.index not in self._heard:
            self._check_heard(decision.replica)
        return decision

    def _check_heard(self, replica: Replica) -> None:
        """Warn once about ``replica`` when it has published no KV event ``SILENT_FEED_S``
        seconds after it was first sent a request of a full block (see the module docstring)."""
        i = replica.index
        if self.feed.blocks[i].num_batches:
            self._heard.add(i)
            self._unheard.pop(i, None)
            return
        now = self._clock()
        first = self._unheard.setdefault(i, [now, 0])
        first[1] += 1
        if now - first[0] < SILENT_FEED_S:
            return
        self._heard.add(i)
        where = self.feed.endpoints[i].endpoint
        logger.warning(
            "kv_events: replica %s was sent %d requests of at least one full KV block since %.0f "
            "s ago but has published no KV event on %s (topic '%s'): check kv_events_endpoints "
            "entry %d against its engine's --kv-events-endpoint, and kv_events_topic against "
            "its --kv-events-topic; until its events arrive the proxy cannot know what its "
            "cache holds",
            replica.url,
            int(first[1]),
            now - first[0],
            where,
            self._topic,
            i + 1,
        )

    def replica_down(self, replica: Replica) -> None:
        self.feed.reset(replica.index)
        self.pending.forget(replica.index)
        self.homes.forget(replica.index)


def _template(options: Mapping[str, Any]) -> str | None:
    """The ``chat_template`` option's text: a file's contents, or the Jinja text itself.

    Raises:
        ConfigError: the file cannot be read, or the value is neither a file nor template text
            (holds no ``{{`` or ``{%``: a mistyped path, which would otherwise render every
            prompt as that path's text), as ``engine serve --chat-template`` refuses it.
    """
    value = options.get("chat_template")
    if value is None:
        return None
    path = Path(str(value)).expanduser()
    if path.is_file():
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"chat_template {str(value)!r} cannot be read: {exc}") from None
    if "{{" not in str(value) and "{%" not in str(value):
        raise ConfigError(
            f"chat_template {str(value)!r} is neither a file (a relative path is read from the "
            "proxy's working directory) nor Jinja template text; give the replicas' "
            "--chat-template file"
        )
    return str(value)


def _endpoint_list(value: object, key: str, replicas: Sequence[str]) -> None:
    count = len(replicas)
    if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
        raise ConfigError(
            f"{key} must be a list of ZeroMQ addresses (tcp://HOST:PORT), got {value!r}"
        )
    if len(value) != count:
        raise ConfigError(
            f"{key} lists {len(value)} address(es) for {count} replicas; give one per replica, "
            "in the order of `replicas`"
        )
    for address in value:
        problem = _address_problem(address)
        if problem is not None:
            raise ConfigError(
                f"{key}: {address!r} {problem}; give the address a subscriber connects to, "
                "tcp://HOST:PORT (the engine's --kv-events-endpoint with its host: tcp://* "
                "binds, it does not connect)"
            )
    flag = "--kv-events-endpoint" if key == "kv_events_endpoints" else "--kv-events-replay-endpoint"
    first: dict[str, int] = {}
    for i, address in enumerate(value):
        j = first.setdefault(address.strip().lower(), i)
        if j != i:  # replica i would be credited with replica j's blocks, and never warned of
            raise ConfigError(
                f"{key} lists {address!r} for both {redact_url(replicas[j])} and "
                f"{redact_url(replicas[i])}; each replica publishes its own KV events: give "
                f"each the address of its own engine's {flag}, in the order of `replicas`"
            )


def _address_problem(address: str) -> str | None:
    """Why a ZeroMQ socket could not connect to ``address`` (ZeroMQ's own check, which the
    feed's thread would otherwise meet, and a TCP port in 1-65535), else None."""
    import zmq

    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sock = ctx.socket(zmq.SUB)
    try:
        sock.connect(address)
    except zmq.ZMQError as exc:
        reason = zmq.strerror(exc.errno) if exc.errno is not None else type(exc).__name__
        return f"is not a ZeroMQ address ({reason})"
    finally:
        sock.close(linger=0)
    if address.startswith("tcp://"):
        port = address.rsplit(":", 1)[-1]
        if not (port.isdigit() and 1 <= int(port) <= 65535):
            return f"has port {port!r}, not one of 1-65535"
    return None


def check_options(settings: RoutingSettings, replicas: Sequence[str]) -> None:
    """Validate the ``kv_events`` keys of one upstream.

    Raises:
        ConfigError: naming the key and what to change.
    """
    options = settings.options
    if "kv_events_endpoints" not in options or "tokenizer" not in options:
        raise ConfigError(
            "policy kv_events needs kv_events_endpoints (one ZeroMQ address per replica, the "
            "engines' --kv-events-endpoint) and tokenizer (the replicas' checkpoint directory)"
        )
    _endpoint_list(options["kv_events_endpoints"], "kv_events_endpoints", replicas)
    if options.get("kv_events_replay_endpoints") is not None:
        _endpoint_list(
            options["kv_events_replay_endpoints"], "kv_events_replay_endpoints", replicas
        )
    for key in ("kv_events_topic", "tokenizer", "chat_template"):
        if key in options and not isinstance(options[key], str):
            raise ConfigError(f"{key} must be a string, got {options[key]!r}")


register_policy(
    PolicySpec(
        "kv_events",
        lambda settings, replicas: KVEventsPolicy(settings, replicas),
        needs="replicas that publish KV events (promptcache engine serve --kv-events-endpoint, "
        "vLLM --kv-events-config) and their tokenizer on the proxy's machine",
        keys=_KEYS,
        check=check_options,
        reads=frozenset({"load_margin", "max_prefixes"}),
    )
)
