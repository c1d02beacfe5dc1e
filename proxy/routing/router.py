"""``Router``: one upstream's replicas, their health, their load, and its routing policy.

The proxy builds one ``Router`` per upstream that lists ``replicas``. Per request the handler
calls ``choose`` (the policy's ``Decision`` among the replicas in rotation), holds ``track``
around the upstream exchange (the in-flight count the policies balance on), and on a refused
connection calls ``mark_down`` and, if nothing reached the client yet, ``choose`` once more with
the failed replica excluded (a ``retry``).

Health: every ``health_interval_s`` each replica gets ``GET health_path``; a 2xx puts it (back)
in rotation, anything else (or no answer within ``health_timeout_s``) takes it out. A refused
connection takes it out at once; the next passing check brings it back. When no replica is in
rotation, requests still go to one of them (least loaded): the client then gets the upstream's
own error rather than one made up by the proxy. A plain ``http://`` replica reached directly is
checked through aiohttp (``direct_client.DirectUpstream``, one kept-alive connection per replica),
others through httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import urllib.request
from collections.abc import Iterator, Sequence

import httpx

from ..config import URL_UPSTREAM_NAME, UpstreamConfig
from ..direct_client import DirectUpstream
from ..forward import tls_failure
from ..redact import redact_url
from .policy import Decision, Policy, Replica, RequestFacts, make_policy
from .settings import RoutingSettings

__all__ = ["Router"]

logger = logging.getLogger("promptcache.proxy.routing")


class Router:
    """Routing state of one upstream with replicas.

    Args:
        upstream: the upstream's config; ``upstream.replicas`` and ``upstream.routing`` set.
        policy: the policy object; by default built from ``upstream.routing.policy``.

    Raises:
        ConfigError: the upstream's policy is not registered.
    """

    def __init__(self, upstream: UpstreamConfig, policy: Policy | None = None) -> None:
        if not upstream.replicas or upstream.routing is None:
            raise ValueError(f"upstream {upstream.name} lists no replicas")
        self.upstream = upstream
        self.settings: RoutingSettings = upstream.routing
        self.replicas = [Replica(i, redact_url(url)) for i, url in enumerate(upstream.replicas)]
        #: per replica, the upstream config requests to it are sent with (same name and limits)
        self.targets = [dataclasses.replace(upstream, url=url) for url in upstream.replicas]
        #: per replica index, the URL its health check GETs, parsed at its first check and kept
        #: (httpx's URL parser is about a third of a check's Python time)
        self._health_urls: dict[int, httpx.URL] = {}
        self.policy = (
            policy if policy is not None else make_policy(self.settings, upstream.replicas)
        )
        #: second attempts after a replica failed before the response started
        self.retries = 0
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        #: per replica index, its health-check session (plain http:// replicas reached directly)
        self._health_sessions: dict[int, DirectUpstream] = {}
        #: no proxy environment variable (HTTP_PROXY...) applies to the health checks
        self._direct_health = upstream.is_loopback or not urllib.request.getproxies()

    # -- per request ----------------------------------------------------------------------

    def choose(self, facts: RequestFacts, exclude: Sequence[Replica] = ()) -> Decision | None:
        """The replica for a request; None when every replica is excluded.

        Replicas in rotation are preferred; with none in rotation, all that are not excluded.
        """
        others = [r for r in self.replicas if r not in exclude] if exclude else self.replicas
        if not others:
            return None
        candidates = [r for r in others if r.healthy] or others
        decision = self.policy.choose(facts, candidates)
        if exclude:
            self.retries += 1
            decision = dataclasses.replace(decision, reason="retry")
        replica = decision.replica
        replica.routed += 1
        return decision

    def target(self, replica: Replica) -> UpstreamConfig:
        """The upstream config a request to ``replica`` is sent with."""
        return self.targets[replica.index]

    @contextlib.contextmanager
    def track(self, replica: Replica) -> Iterator[None]:
        """Count a request in ``replica.in_flight`` for the duration of the block."""
        replica.in_flight += 1
        try:
            yield
        finally:
            replica.in_flight -= 1

    @property
    def _named(self) -> str:
        """The upstream's name and a space for log lines; nothing for one given as URLs (its
        name, ``URL_UPSTREAM_NAME``, is internal)."""
        return "" if self.upstream.name == URL_UPSTREAM_NAME else f"{self.upstream.name} "

    def mark_down(self, replica: Replica, reason: str, *, refused: bool = False) -> None:
        """Take ``replica`` out of rotation until a health check passes.

        ``refused``: a request sent to it failed to reach it. The policy then forgets what it
        holds even when it was out of rotation already: with no replica in rotation requests
        still go to it, and the choice noted the request's prefix there, which it never got.
        """
        replica.last_error = reason
        if replica.healthy:
            replica.healthy = False
            logger.warning("%sreplica %s out of rotation: %s", self._named, replica.url, reason)
            self.policy.replica_down(replica)
        elif refused:
            self.policy.replica_down(replica)

    def mark_up(self, replica: Replica) -> None:
        """Put ``replica`` back in rotation."""
        if not replica.healthy:
            replica.healthy = True
            logger.warning("%sreplica %s back in rotation", self._named, replica.url)
            self.policy.replica_up(replica)

    # -- lifecycle and health -------------------------------------------------------------

    async def start(self) -> None:
        """Start the policy and the periodic health checks."""
        await self.policy.start()
        self._client = httpx.AsyncClient(
            timeout=self.settings.health_timeout_s,
            trust_env=not self.upstream.is_loopback,
            follow_redirects=False,
        )
        self._task = asyncio.create_task(self._health_loop(), name=f"health {self.upstream.name}")

    async def aclose(self) -> None:
        """Stop the health checks and the policy."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        for session in self._health_sessions.values():
            await session.aclose()
        self._health_sessions.clear()
        await self.policy.aclose()

    async def check_health(self) -> None:
        """Health-check every replica once, concurrently (see the module docstring)."""
        await asyncio.gather(*(self._check(r) for r in self.replicas))

    async def _health_loop(self) -> None:
        while True:
            try:
                await self.check_health()
            except Exception:  # the loop must outlive any one round
                logger.exception("health checks of %s failed", self.upstream.name)
            await asyncio.sleep(self.settings.health_interval_s)

    async def _check(self, replica: Replica) -> None:
        assert self._client is not None
        url = self._health_urls.get(replica.index)
        if url is None:
            target = self.targets[replica.index].url.rstrip("/") + self.settings.health_path
            url = self._health_urls[replica.index] = httpx.URL(target)
        try:
            if url.scheme == "http" and self._direct_health:
                status = await self._get_direct(replica.index, url)
            else:
                status = (await self._client.get(url)).status_code
        except httpx.HTTPError as exc:
            tls = tls_failure(exc)  # what to change, not only the SSL library's words
            why = f"{type(exc).__name__}: {exc}" if tls is None else f"it {tls}: {exc}"
            self.mark_down(replica, f"health check failed: {why}")
            return
        if 200 <= status < 300:
            self.mark_up(replica)
        elif status in (404, 405):  # a server without that path (an engine other than ours)
            self.mark_down(
                replica,
                f"health check answered HTTP {status} to GET {self.settings.health_path}; if "
                "the server has no such path, set health_path in its [upstreams.NAME] table of "
                'a --config file to one it answers with a 2xx (e.g. "/v1/models")',
            )
        else:
            self.mark_down(replica, f"health check answered HTTP {status}")

    async def _get_direct(self, index: int, url: httpx.URL) -> int:
        """The status of ``GET url`` on replica ``index``'s kept-alive connection (opened when
        it has none), its body read and dropped.

        Raises:
            httpx.TransportError: no connection, or no whole answer within ``health_timeout_s``
                per step (connect, head, each body read).
        """
        session = self._health_sessions.get(index)
        if session is None:
            timeout = self.settings.health_timeout_s
            origin = f"http://{url.netloc.decode('ascii')}"
            session = self._health_sessions[index] = DirectUpstream(
                origin, 1, timeout, timeout, 2 * self.settings.health_interval_s + timeout
            )
        response = await session.send(
            "GET", url.raw_path.decode("ascii"), [(b"accept", b"*/*")], b""
        )
        try:
            async for _ in response.aiter_raw():
                pass
        finally:
            response.release()
        return response.status_code
