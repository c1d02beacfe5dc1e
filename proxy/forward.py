"""Talking to the upstreams: pooled ``httpx.AsyncClient`` s per upstream, headers in and out.

Request bodies go out as the exact bytes the client sent (no re-serialisation: ``cache_control``,
TTLs and key order reach the upstream untouched). Headers pass through except:

- hop-by-hop headers (RFC 9110 section 7.6.1): the fixed set, and every header the message's
  ``Connection`` header names (in both directions);
- ``host`` / ``content-length`` (httpx sets them for the upstream connection);
- the proxy's own ``x-promptcache-auth`` header;
- ``accept-encoding``, sent as ``identity``: the proxy reads usage out of the response bytes it
  relays, and asking for them uncompressed means the client still gets exactly the upstream's bytes.

Plain ``http://`` upstreams reached directly (loopback ones, or any when no proxy environment
variable applies) go through aiohttp's client (``direct_client.DirectUpstream``: a C response
parser, a fraction of httpx's CPU per request); ``https://`` ones, those behind an environment
proxy, and ``HEAD`` requests go through httpx. Both raise httpx's exceptions.

httpx's transport errors are translated here, at the boundary, into ``UpstreamTimeoutError`` (the
client gets 504) and ``UpstreamUnreachableError`` (502), both ``promptcache.errors.UpstreamError``.

A pooled keep-alive connection the upstream closes just as a request goes out on it (servers
close idle connections on their own clock: uvicorn after 5 s, gunicorn after 2 s) fails with
no answer at all. Such a request is sent once more on a fresh connection: see ``_Attempt``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import select
import socket
import ssl
import urllib.request
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import anyio
import httpcore
import httpx

from promptcache.errors import UpstreamError

from .config import AUTH_HEADER, UpstreamConfig
from .direct_client import DirectResponse, DirectUpstream
from .redact import redact_url

__all__ = [
    "UpstreamPool",
    "UpstreamTimeoutError",
    "UpstreamUnreachableError",
    "connection_options",
    "request_headers",
    "response_headers",
]

#: RFC 9110 7.6.1 hop-by-hop headers, plus proxy-* ones; never forwarded in either direction.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
_DROP_REQUEST = HOP_BY_HOP | {b"host", b"content-length", b"expect", b"accept-encoding"}

logger = logging.getLogger("promptcache.proxy")


class UpstreamTimeoutError(UpstreamError):
    """The upstream did not connect, answer or send the next chunk in time (-> 504)."""


class UpstreamUnreachableError(UpstreamError):
    """The upstream refused the connection, was not found, or broke the protocol (-> 502)."""


def request_headers(
    headers: Iterable[tuple[bytes, bytes]], auth_header: bytes = AUTH_HEADER.encode()
) -> list[tuple[bytes, bytes]]:
    """The client's headers as they go to the upstream (see the module docstring).

    Args:
        headers: ASGI header pairs (lower-case names), duplicates kept in order.
        auth_header: the proxy's own auth header name, removed.
    """
    headers = list(headers)
    drop = _DROP_REQUEST
    named = [value for name, value in headers if name == b"connection"]  # ASGI: lower-case
    if named:
        drop = drop | _options(named)
    out = [(k, v) for k, v in headers if k not in drop and k != auth_header]
    out.append((b"accept-encoding", b"identity"))
    return out


def response_headers(
    headers: Sequence[tuple[bytes, bytes]], *, keep_length: bool
) -> list[tuple[bytes, bytes]]:
    """The upstream's response headers as they go to the client, names in lower case.

    Args:
        headers: the response's header pairs as received (``response.headers.raw``: httpx's,
            or aiohttp's ``raw_headers`` through ``direct_client.DirectResponse``).
        keep_length: False when the proxy changes the body (drops a chunk), so the length is
            dropped and the server frames the body itself.
    """
    drop = HOP_BY_HOP if keep_length else _HOP_BY_HOP_AND_LENGTH
    lowered = [(k.lower(), v) for k, v in headers]
    named = [value for name, value in lowered if name == b"connection"]
    if named:
        drop = drop | _options(named)
    return [(k, v) for k, v in lowered if k not in drop]


_HOP_BY_HOP_AND_LENGTH = HOP_BY_HOP | {b"content-length"}


def connection_options(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The header names a message's ``Connection`` header(s) list (lower-case).

    RFC 9110 section 7.6.1: a proxy must remove the ``Connection`` header and every header it
    names (``Connection: keep-alive, x-session`` makes ``x-session`` hop-by-hop) before
    forwarding the message.
    """
    return _options([value for name, value in headers if name.lower() == b"connection"])


def _options(values: Iterable[bytes]) -> frozenset[bytes]:
    """The header names listed in ``Connection`` header values (lower-case, no empty one)."""
    names = {option.strip().lower() for value in values for option in value.split(b",")}
    names.discard(b"")
    return frozenset(names)


#: Keep-alive connections per ``httpx.AsyncClient``. On every request, httpcore 1.0's pool
#: checks each of a client's connections (one ``poll`` per idle one) and counts them in a loop
#: quadratic in their number; at 128 connections that is milliseconds of CPU per request. Several
#: small clients per upstream keep the cost flat at any concurrency. Two is the measured best:
#: at 32 concurrent requests the proxy spends 0.86 ms of CPU per request with 2 (0.85 with 1,
#: 1.10 with 8) and serves 1.3x the requests/s it did with 8 (``benchmarks/proxy_overhead.py``).
SHARD_CONNECTIONS = 2

#: Request bytes held back to go out in one ``send`` with what follows (see ``_Stream``).
COALESCE_BYTES = 64 * 1024

#: Seconds an idle pooled connection is kept open.
KEEPALIVE_EXPIRY_S = 30.0


#: Upstream URLs kept parsed (per upstream and path); the cache is emptied when full.
URL_CACHE_SIZE = 1024


@dataclass
class _Attempt:
    """What the network stream saw of one request attempt (set by ``_Stream``).

    A request may be sent again when it went out on a reused connection and the upstream
    answered not one byte before the connection failed: the upstream closed the idle connection
    as the request reached it (its keep-alive timer fired first, so it never read the request).
    On a fresh connection, or after any response byte, a failure is the upstream's answer.
    """

    #: the connection had carried an earlier exchange (bytes were read on it before this one)
    reused: bool = False
    #: a response byte of this attempt arrived
    answered: bool = False
    #: the stream carrying this attempt (the first one written to)
    stream: _Stream | None = None


_ATTEMPT: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar(
    "promptcache_proxy_attempt", default=None
)

#: Transport errors of a connection that died under a request: retried once when ``_Attempt``
#: says the upstream closed an idle connection (httpcore: RemoteProtocolError "Server
#: disconnected without sending a response", ReadError on a reset, WriteError on a broken pipe).
_CLOSED_UNDER_REQUEST = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


@dataclass
class _Shard:
    client: httpx.AsyncClient
    #: the client's transport when requests may skip the client (no environment proxy applies)
    transport: httpx.AsyncHTTPTransport | None
    #: the transport whose pool holds the client's connections (idle ones are dropped on retry)
    pooled: httpx.AsyncHTTPTransport
    #: the client's pool size (``SHARD_CONNECTIONS``, or what is left of ``max_connections``)
    capacity: int
    in_flight: int = 0


@dataclass
class _Upstream:
    """One upstream's clients and its admission gate."""

    #: one permit per allowed connection; a request holds one from before it picks a client
    #: until its response is closed, so it waits for the first connection freed on any client
    slots: asyncio.Semaphore
    shards: list[_Shard] = field(default_factory=list)
    capacity: int = 0  # sum of the shards' capacities
    #: the aiohttp session of an ``http://`` upstream reached directly, else None
    direct: DirectUpstream | None = None


class UpstreamPool:
    """Pooled ``httpx.AsyncClient`` s per upstream, created on demand, closed by ``aclose``.

    An upstream gets clients of ``SHARD_CONNECTIONS`` keep-alive connections each (the last one
    smaller if ``max_connections`` is not a multiple), never more than ``max_connections``
    connections in all. A request first takes one of ``max_connections`` permits, waiting up to
    the upstream's pool timeout for one (so a waiting request gets the first connection freed on
    any client), then goes to the client with the most free connections (the first one while
    traffic is light, so connections are reused); a client is added only when every existing one
    is full. Clients use the upstream's connect / read / write timeouts. Proxy environment
    variables (HTTPS_PROXY...) apply to remote upstreams only, never to loopback ones.
    """

    def __init__(self, upstreams: Mapping[str, UpstreamConfig]) -> None:
        self._upstreams = dict(upstreams)
        # keyed by (name, url): each replica of an upstream has its own clients
        self._states: dict[tuple[str, str], _Upstream] = {}
        # Loading the CA bundle takes ~0.1 s of CPU; do it once here, not per client on the
        # event loop when load grows (httpx builds a context even for http:// clients).
        self._ssl_context = httpx.create_ssl_context()
        self._urls: dict[tuple[str, str, bytes], httpx.URL] = {}
        self._bases: dict[tuple[str, str], httpx.URL] = {}
        self._timeout_dicts: dict[str, dict[str, float | None]] = {}
        # HTTP(S)_PROXY and friends: requests to a remote upstream then go through the client,
        # which routes them to the proxy.
        self._env_proxies = bool(urllib.request.getproxies())

    def _state(self, upstream: UpstreamConfig) -> _Upstream:
        key = (upstream.name, upstream.url)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = _Upstream(asyncio.Semaphore(upstream.max_connections))
            url = httpx.URL(upstream.url)
            if url.scheme == "http" and (upstream.is_loopback or not self._env_proxies):
                state.direct = DirectUpstream(
                    upstream.url,
                    upstream.max_connections,
                    upstream.connect_timeout_s,
                    upstream.read_timeout_s,
                    KEEPALIVE_EXPIRY_S,
                )
        return state

    def _shard(self, upstream: UpstreamConfig, state: _Upstream) -> _Shard:
        """The client for a request that holds a permit (so some client has, or can get, room)."""
        best = max(state.shards, key=lambda shard: shard.capacity - shard.in_flight, default=None)
        if best is not None and best.in_flight < best.capacity:
            return best
        connections = min(SHARD_CONNECTIONS, upstream.max_connections - state.capacity)
        transport = _transport(connections, self._ssl_context)
        client = _new_client(upstream, transport, self._ssl_context)
        direct = upstream.is_loopback or not self._env_proxies
        shard = _Shard(client, transport if direct else None, transport, connections)
        state.shards.append(shard)
        state.capacity += connections
        return shard

    async def _admit(self, upstream: UpstreamConfig, state: _Upstream) -> None:
        """Take a connection permit, waiting at most the upstream's pool timeout.

        Raises:
            UpstreamTimeoutError: all ``max_connections`` stayed busy for the pool timeout.
        """
        if not state.slots.locked():
            await state.slots.acquire()  # free: returns without suspending
            return
        try:
            await asyncio.wait_for(state.slots.acquire(), upstream.pool_timeout_s)
        except asyncio.TimeoutError:  # TimeoutError on 3.11+, its own class on 3.10
            raise UpstreamTimeoutError(
                f"upstream {upstream.described} had no free pooled "
                f"connection in time: all {upstream.max_connections} connections stayed busy for "
                f"{upstream.pool_timeout_s:g} s (raise max_connections or pool_timeout_s)"
            ) from None

    def _url(self, upstream: UpstreamConfig, raw_path: bytes, query_string: bytes) -> httpx.URL:
        """The upstream URL for a request path; parsed once per upstream and path.

        URLs with a query string are not cached: it may carry an API key (Gemini's ``key=``).
        """
        key = (upstream.name, upstream.url, raw_path)
        if not query_string and (url := self._urls.get(key)) is not None:
            return url
        base = self._bases.get(key[:2])
        if base is None:
            base = self._bases[key[:2]] = httpx.URL(upstream.url)
        target = base.raw_path.rstrip(b"/") + raw_path
        url = base.copy_with(raw_path=target + b"?" + query_string if query_string else target)
        if query_string:
            return url
        if len(self._urls) >= URL_CACHE_SIZE:
            self._urls.clear()
        self._urls[key] = url
        return url

    def stream(
        self,
        upstream: UpstreamConfig,
        method: str,
        raw_path: bytes,
        query_string: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> AbstractAsyncContextManager[httpx.Response]:
        """Send a request: an async context manager whose ``async with`` gives the response with
        its body not yet read, and closes it after.

        Leaving the block early (the client went away) closes the upstream connection.

        Raises:
            UpstreamTimeoutError: connect, write, pool or first-read timeout (on entering).
            UpstreamUnreachableError: refused, DNS failure, protocol error (on entering).
        """
        state = self._state(upstream)
        if state.direct is not None and method != "HEAD":
            # A plain object rather than a generator-based context manager: this is every
            # routed request's way upstream, before it went out.
            target = raw_path + b"?" + query_string if query_string else raw_path
            return _DirectExchange(self, upstream, state, method, target, headers, body)
        return self._stream_httpx(upstream, state, method, raw_path, query_string, headers, body)

    @asynccontextmanager
    async def _stream_httpx(
        self,
        upstream: UpstreamConfig,
        state: _Upstream,
        method: str,
        raw_path: bytes,
        query_string: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> AsyncIterator[httpx.Response]:
        """``stream`` through httpx (``https://`` upstreams, environment proxies, ``HEAD``)."""
        # httpx.Request, not client.build_request: no client default headers (User-Agent...) or
        # cookies are added to what the client sent.
        request = httpx.Request(
            method,
            self._url(upstream, raw_path, query_string),
            headers=headers,
            content=body,
            extensions={"timeout": self._timeouts(upstream)},
        )
        await self._admit(upstream, state)
        try:
            shard = self._shard(upstream, state)
            shard.in_flight += 1
            try:
                response = await self._send(upstream, shard, request)
                try:
                    yield response
                finally:
                    with anyio.CancelScope(shield=True):
                        await response.aclose()
            finally:
                shard.in_flight -= 1
        finally:
            state.slots.release()

    async def _send(
        self, upstream: UpstreamConfig, shard: _Shard, request: httpx.Request
    ) -> httpx.Response:
        """Send ``request`` through ``shard``; once more on a fresh connection when a reused one
        was closed by the upstream under it (``_Attempt``).

        Raises:
            UpstreamTimeoutError, UpstreamUnreachableError: as ``stream``.
        """
        for retry in (False, True):
            attempt = _Attempt()
            token = _ATTEMPT.set(attempt)
            try:
                if shard.transport is not None:
                    # Straight to the transport: the client layer would only add cookie
                    # bookkeeping, auth and redirect hooks the proxy has turned off anyway.
                    return await shard.transport.handle_async_request(request)
                return await shard.client.send(request, stream=True)
            except httpx.TimeoutException as exc:
                raise UpstreamTimeoutError(describe_transport_error(upstream, exc)) from exc
            except httpx.TransportError as exc:
                closed_idle = (
                    isinstance(exc, _CLOSED_UNDER_REQUEST)
                    and attempt.reused
                    and not attempt.answered
                )
                if retry or not closed_idle:
                    raise UpstreamUnreachableError(describe_transport_error(upstream, exc)) from exc
                logger.debug(
                    "upstream %s closed a pooled connection as a request went out (%s): "
                    "sending it again on a fresh connection",
                    upstream.name,
                    exc,
                )
                await _drop_idle(shard.pooled)
            finally:
                _ATTEMPT.reset(token)
        raise AssertionError("unreachable")  # the second pass returns or raises

    async def _send_direct(
        self,
        upstream: UpstreamConfig,
        direct: DirectUpstream,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> DirectResponse:
        """Send a request through aiohttp (which sends it once more on a new connection when a
        reused one was closed by the upstream under it, as ``_send``).

        Raises:
            UpstreamTimeoutError, UpstreamUnreachableError: as ``stream``.
        """
        try:
            return await direct.send(method, target.decode("latin-1"), headers, body)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeoutError(describe_transport_error(upstream, exc)) from exc
        except httpx.TransportError as exc:
            raise UpstreamUnreachableError(describe_transport_error(upstream, exc)) from exc

    def _timeouts(self, upstream: UpstreamConfig) -> dict[str, float | None]:
        timeouts = self._timeout_dicts.get(upstream.name)
        if timeouts is None:
            timeouts = self._timeout_dicts[upstream.name] = _timeout(upstream).as_dict()
        return timeouts

    async def aclose(self) -> None:
        """Close every client and its pooled connections."""
        for state in self._states.values():
            for shard in state.shards:
                await shard.client.aclose()
            if state.direct is not None:
                await state.direct.aclose()
        self._states.clear()


class _DirectExchange:
    """``UpstreamPool.stream`` through an upstream's aiohttp session (``direct_client``): takes
    a connection permit and sends the request on entering, gives the response; on leaving, ends
    the exchange (``DirectResponse.release``) and gives the permit back."""

    __slots__ = ("_args", "_pool", "_response", "_state", "_upstream")

    def __init__(
        self,
        pool: UpstreamPool,
        upstream: UpstreamConfig,
        state: _Upstream,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> None:
        self._pool = pool
        self._upstream = upstream
        self._state = state
        self._args = (method, target, headers, body)
        self._response: DirectResponse | None = None

    async def __aenter__(self) -> httpx.Response:
        upstream, state = self._upstream, self._state
        assert state.direct is not None
        await self._pool._admit(upstream, state)
        try:
            self._response = await self._pool._send_direct(upstream, state.direct, *self._args)
        except BaseException:
            state.slots.release()
            raise
        return self._response  # type: ignore[return-value]  # httpx.Response's interface, in part

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            assert self._response is not None
            self._response.release()
        finally:
            self._state.slots.release()


class _Stream(httpcore.AsyncNetworkStream):
    """An httpcore network stream with a cheap ``is_readable`` check and coalesced writes.

    httpcore asks every idle pooled connection ``get_extra_info("is_readable")`` on each request;
    its anyio stream answers by rebuilding anyio's whole attribute table (a ``getpeername`` call
    and a dict of lambdas, about 15 us). The socket is looked up once here instead.

    httpcore writes a request's head and its body separately: two ``send`` system calls and, with
    ``TCP_NODELAY``, two TCP segments. Writes are held here (up to ``COALESCE_BYTES``) and sent
    together just before the next read, which for HTTP/1.1 comes right after the request is
    written; the bytes on the wire are the same.
    """

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._socket: socket.socket | None = stream.get_extra_info("socket")
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._write_timeout: float | None = None
        self._bytes_read = 0  # over the connection's life: > 0 once an exchange was answered

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._pending:
            await self._flush()
        data = await self._stream.read(max_bytes, timeout)
        if data:
            self._bytes_read += len(data)
            attempt = _ATTEMPT.get()
            if attempt is not None and attempt.stream is self:
                attempt.answered = True
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        attempt = _ATTEMPT.get()
        if attempt is not None and attempt.stream is None:
            attempt.stream = self
            attempt.reused = self._bytes_read > 0
        self._pending.append(buffer)
        self._pending_bytes += len(buffer)
        self._write_timeout = timeout
        if self._pending_bytes >= COALESCE_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending = []
        self._pending_bytes = 0
        await self._stream.write(data, self._write_timeout)

    async def aclose(self) -> None:
        self._pending = []
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return _is_readable(self._socket)
        if info == "socket":
            return self._socket
        return self._stream.get_extra_info(info)


class _NetworkBackend(httpcore.AsyncNetworkBackend):
    """httpcore's anyio backend, handing out ``_Stream`` s."""

    def __init__(self) -> None:
        self._backend = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return _Stream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return _Stream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def _is_readable(sock: socket.socket | None) -> bool:
    """Whether ``sock`` has data (or EOF) waiting: an idle keep-alive connection the server
    closed. A missing or closed socket counts as readable (so the pool drops it)."""
    if sock is None or sock.fileno() < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


async def _drop_idle(transport: httpx.AsyncHTTPTransport) -> None:
    """Close the idle connections of ``transport``'s pool, so the next request opens a fresh one
    (they went idle together with the one the upstream just closed)."""
    pool = getattr(transport, "_pool", None)
    if isinstance(pool, httpcore.AsyncConnectionPool):
        for connection in pool.connections:
            if connection.is_idle():
                await connection.aclose()


def _transport(connections: int, ssl_context: ssl.SSLContext) -> httpx.AsyncHTTPTransport:
    """httpx's transport over an httpcore pool that uses ``_NetworkBackend``.

    httpx does not take a network backend, so the pool it builds is replaced by an identical
    one built through httpcore's public constructor (``_pool`` is where httpx keeps it, in
    0.27 and 0.28); were that ever to change, the stock pool would simply stay, slower.
    """
    transport = httpx.AsyncHTTPTransport(
        verify=ssl_context,
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )
    if isinstance(getattr(transport, "_pool", None), httpcore.AsyncConnectionPool):
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
            network_backend=_NetworkBackend(),
        )
    return transport


def _timeout(upstream: UpstreamConfig) -> httpx.Timeout:
    return httpx.Timeout(
        connect=upstream.connect_timeout_s,
        read=upstream.read_timeout_s,
        write=upstream.write_timeout_s,
        pool=upstream.pool_timeout_s,
    )


def _new_client(
    upstream: UpstreamConfig, transport: httpx.AsyncHTTPTransport, ssl_context: ssl.SSLContext
) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=transport,  # its pool sets the connection limits
        verify=ssl_context,
        timeout=_timeout(upstream),
        follow_redirects=False,
        trust_env=not upstream.is_loopback,
        cookies=_no_cookies(),
    )


def _no_cookies() -> httpx.Cookies:
    """A cookie jar that keeps nothing: one client's Set-Cookie must never reach another client."""
    return httpx.Cookies(CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])))


def describe_transport_error(upstream: UpstreamConfig, exc: httpx.TransportError) -> str:
    """A one-line description of a transport failure, naming the upstream and its URL."""
    kind = {
        httpx.ConnectTimeout: "did not accept a connection in time",
        httpx.ReadTimeout: "did not answer in time",
        httpx.WriteTimeout: "did not take the request body in time",
        httpx.PoolTimeout: "had no free pooled connection in time",
        httpx.ConnectError: "refused the connection or could not be reached",
        httpx.RemoteProtocolError: "broke the HTTP protocol",
        httpx.ReadError: "dropped the connection",
    }.get(type(exc), "failed")
    settings: dict[type[httpx.TransportError], tuple[str, float]] = {
        httpx.ConnectTimeout: ("connect_timeout_s", upstream.connect_timeout_s),
        httpx.ReadTimeout: ("read_timeout_s", upstream.read_timeout_s),
        httpx.WriteTimeout: ("write_timeout_s", upstream.write_timeout_s),
        httpx.PoolTimeout: ("pool_timeout_s", upstream.pool_timeout_s),
    }
    setting = settings.get(type(exc))
    if setting is not None:  # which limit ran out, and where it is set
        kind += f" ({setting[0]} = {setting[1]:g} s, set per upstream in --config)"
    tls = tls_failure(exc)
    if tls is not None:  # the connection was taken: what failed is the TLS handshake
        kind = tls
    # httpx ends some messages with a period ("Server disconnected without sending a
    # response."); callers append "; clients get 502 ..." or " (before any byte)"
    detail = redact_url(str(exc)).removesuffix(".") or type(exc).__name__
    return f"upstream {upstream.described} {kind}: {detail}"


def tls_failure(exc: BaseException) -> str | None:
    """What to say of a failed TLS handshake behind ``exc`` (an ``ssl.SSLError`` among its
    causes), with what to change; None when no TLS error caused it.

    A server that speaks plain HTTP answers a ClientHello with bytes that are no TLS record
    (``WRONG_VERSION_NUMBER``, ``record layer failure``, ``packet length too long``); an
    untrusted certificate is an ``ssl.SSLCertVerificationError``.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                "presented a TLS certificate the proxy does not trust (for a private CA, "
                "start the proxy with SSL_CERT_FILE set to its CA bundle)"
            )
        if isinstance(cause, ssl.SSLError):
            text = str(cause)
            plain = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "record layer failure",
                     "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST", "wrong version number")  # fmt: skip
            if any(marker in text for marker in plain):
                return (
                    "did not answer the TLS handshake as a TLS server would (it seems to speak "
                    "plain HTTP: give its URL with http:// instead of https://)"
                )
            return "failed the TLS handshake"
        cause = cause.__cause__ or cause.__context__
    return None
