"""Routing across an upstream's replicas: policies, the prefix index, health and load.

``Router`` (``router.py``) holds one upstream's replicas, health and in-flight counts and asks a
``Policy`` (``policy.py``) where each request goes. Built-in policies: ``prefix``
(``prefix.py``, on the prompt-chunk hashes of ``chunks.py``), ``least_loaded``,
``round_robin``, ``kv_events`` (``kv_events.py``, fed by ``kv_index.py``, tokenising through
``token_cache.py``); a policy registers itself with ``register_policy`` so that the config
accepts its name. ``metrics.py`` exposes the routers' state and the routing regret.
"""

from __future__ import annotations

from . import kv_events as _kv_events  # noqa: F401  (registers the "kv_events" policy)
from . import prefix as _prefix  # noqa: F401  (registers the "prefix" policy)
from .policy import (
    KNOWN_POLICIES,
    POLICIES,
    TUNING_KEYS,
    Decision,
    Policy,
    PolicySpec,
    Replica,
    RequestFacts,
    make_policy,
    policy_spec,
    register_policy,
)
from .settings import ROUTING_KEYS, RoutingSettings

__all__ = [
    "KNOWN_POLICIES",
    "POLICIES",
    "ROUTING_KEYS",
    "TUNING_KEYS",
    "Decision",
    "Policy",
    "PolicySpec",
    "Replica",
    "RequestFacts",
    "RoutingSettings",
    "make_policy",
    "policy_spec",
    "register_policy",
]
