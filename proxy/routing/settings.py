"""``RoutingSettings``: how an upstream with several replicas spreads its requests.

Read from the ``[upstreams.NAME]`` table that lists ``replicas`` (see ``proxy/config.py``)::

    [upstreams.fleet]
    replicas = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
    policy = "prefix"          # or "least_loaded", "round_robin", "kv_events"
    load_margin = 4            # prefix: leave the matching replica only when it has more than
                               # this many requests in flight above the other replicas' mean
    load_ratio = 2.0           # prefix: ... and more than this many times that mean
    health_path = "/health"    # GET every health_interval_s; 200 = in rotation
    health_interval_s = 2
    prefix_ttl_s = 600         # prefix: forget a replica's prefix after this long unused
    max_prefixes = 20000       # prefix: prompt chunks (64 characters) remembered per replica (LRU)

Policy-specific keys (``kv_events``'s endpoints...) are declared by the policy's ``PolicySpec``
(``proxy/routing/policy.py``) and kept in ``options``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from promptcache.errors import ConfigError

__all__ = ["ROUTING_KEYS", "RoutingSettings"]


@dataclass(frozen=True)
class RoutingSettings:
    """Routing of one upstream over its replicas.

    Attributes:
        policy: a registered policy name (``proxy.routing.POLICIES``): ``prefix`` (default),
            ``least_loaded``, ``round_robin``, ``kv_events`` where available.
        load_margin: requests in flight (a count); ``prefix`` leaves a request's matching
            replica only when that replica has more than this many requests in flight above
            the mean of the other replicas in rotation (and more than ``load_ratio`` times it);
            ``kv_events`` when its best holder has more than this many above the least loaded
            replica.
        load_ratio: ``prefix``: a matching replica is also over its share only with more than
            this many times the other replicas' mean requests in flight (a number >= 1), so
            that at high load a difference of ``load_margin`` alone does not move a request.
        health_path: path GET-ed on each replica (``/health`` on our engine, vLLM and SGLang);
            any answer but 2xx, or none within ``health_timeout_s``, takes it out of rotation.
        health_interval_s: seconds between health checks of each replica.
        health_timeout_s: seconds a health check may take.
        prefix_ttl_s: seconds a prefix hash stays in a replica's index after it last routed a
            request there (an engine evicts idle blocks; the index only guesses).
        max_prefixes: ``prefix``: prompt-chunk hashes kept per replica (64 characters each, so
            20,000 cover about 1.3 million characters, some 320,000 tokens); ``kv_events``:
            block hashes in its "home" and pending maps. The least recently used go first.
        options: policy-specific keys (declared by the policy's ``PolicySpec.keys``).

    Raises:
        ConfigError: a value out of range (the message names the key).
    """

    policy: str = "prefix"
    load_margin: int = 4
    load_ratio: float = 2.0
    health_path: str = "/health"
    health_interval_s: float = 2.0
    health_timeout_s: float = 2.0
    prefix_ttl_s: float = 600.0
    max_prefixes: int = 20_000
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.policy, str):
            raise ConfigError(f"policy must be a policy name (a string), got {self.policy!r}")
        _whole(self.load_margin, "load_margin", minimum=0)
        _whole(self.max_prefixes, "max_prefixes", minimum=1)
        ratio = self.load_ratio
        if not (
            isinstance(ratio, (int, float))
            and not isinstance(ratio, bool)
            and 1 <= ratio < math.inf
        ):
            raise ConfigError(f"load_ratio must be a finite number >= 1, got {ratio!r}")
        for key in ("health_interval_s", "health_timeout_s", "prefix_ttl_s"):
            value = getattr(self, key)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (ok and 0 < value < math.inf):
                raise ConfigError(f"{key} must be a finite number of seconds > 0, got {value!r}")
        if not isinstance(self.health_path, str) or not self.health_path.startswith("/"):
            raise ConfigError(
                f"health_path must be a path starting with '/', e.g. /health; got "
                f"{self.health_path!r}"
            )


def _whole(value: object, key: str, *, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{key} must be a whole number >= {minimum}, got {value!r}")


#: The ``[upstreams.NAME]`` keys that configure routing (besides ``replicas``).
ROUTING_KEYS = frozenset(f for f in RoutingSettings.__dataclass_fields__ if f != "options")
