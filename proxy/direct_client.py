"""Plain ``http://`` upstreams reached directly, through aiohttp's client.

``forward.UpstreamPool`` sends a request here when its upstream is ``http://`` and no proxy
environment variable applies (loopback upstreams always; remote ones when no ``HTTP_PROXY``...
is set), except ``HEAD``; the rest (TLS, environment proxies, ``HEAD``) goes through httpx.
aiohttp parses responses in C and hands the body over as whatever arrived in one read
(``StreamReader.iter_any``), so the relay sends one message to the client per upstream read;
httpx, httpcore, h11 and anyio run about 1,900 Python calls for one streamed chat completion of
15 SSE events (profiled under ``benchmarks/proxy_routing.py``'s chat workload, 2026-12-03).

The contract is httpx's, so the forwarding code above does not tell the two clients apart:

- errors are httpx's transport exceptions: ``ConnectError``, ``ConnectTimeout``,
  ``ReadTimeout``, ``ReadError``, ``RemoteProtocolError`` (aiohttp's are translated here);
- ``DirectResponse`` has ``status_code``, ``headers.raw`` (the header pairs exactly as
  received, aiohttp's ``raw_headers``) / ``headers.get``, and ``aiter_raw()`` (the body with the
  chunked framing removed, no content decoding: ``auto_decompress=False``); beyond httpx's
  interface, ``body_complete()`` tells whether the body's end has arrived with what was read.

Requests go out with the head httpx would send: ``Host`` first, then ``Content-Length: 0`` for
an empty ``POST``, ``PUT`` or ``PATCH``, then the given headers in order, then
``Content-Length`` of a non-empty body; aiohttp's own defaults (``Accept``, ``Accept-Encoding``,
``User-Agent``, ``Content-Type``) are turned off, and the request target is sent as given
(``yarl.URL(..., encoded=True)``). Interim 1xx responses are skipped by aiohttp. aiohttp has no
write timeout: a request body the upstream does not take counts against the read timeout (the
response head is awaited with it).
"""

from __future__ import annotations

import contextvars
import functools
import logging
import re
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import aiohttp
import httpx
from aiohttp.client_proto import ResponseHandler
from aiohttp.http_exceptions import ContentLengthError, TransferEncodingError
from yarl import URL

__all__ = ["DirectResponse", "DirectUpstream", "RawHeaders"]

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: aiohttp's default request headers, none of which httpx.Request adds
_SKIP_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
#: Errors of a connection that died under a request before any response head: a pooled one the
#: upstream closed while it sat idle (see ``DirectUpstream.send``).
_CLOSED_UNDER_REQUEST = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)

#: Set around a request: the connector records there whether its connection had carried an
#: exchange before (``[reused]``).
_REUSED: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "promptcache_proxy_reused", default=None
)

logger = logging.getLogger("promptcache.proxy")


class RawHeaders:
    """A response's header pairs as received (``raw``), with httpx's case-insensitive ``get``."""

    __slots__ = ("raw",)

    def __init__(self, raw: Sequence[tuple[bytes, bytes]]) -> None:
        self.raw = raw

    def get(self, name: str, default: str = "") -> str:
        """The first value of header ``name`` (any case), decoded as Latin-1, else ``default``."""
        key = name.lower().encode("latin-1")
        for k, v in self.raw:
            if k.lower() == key:
                return v.decode("latin-1")
        return default


class DirectResponse:
    """One response, its body not yet read; ``release`` hands the connection back (or closes
    it when the body was not read whole or the upstream ends the connection)."""

    __slots__ = ("_close", "_response", "body_complete", "headers", "status_code")

    def __init__(self, response: aiohttp.ClientResponse, close: bool = False) -> None:
        self._response = response
        self._close = close  # never keep the connection
        self.status_code = response.status
        self.headers = RawHeaders(response.raw_headers)
        #: ``() -> bool``: whether the whole body has arrived and been read (``aiter_raw`` has
        #: nothing more to give: its next read would end the iteration at once); aiohttp's own
        #: ``StreamReader.at_eof``, called once per chunk the relay reads
        self.body_complete: Callable[[], bool] = response.content.at_eof

    def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives: each item everything that arrived in one read (never empty).

        Raises:
            httpx.ReadTimeout: nothing arrived for the read timeout.
            httpx.ReadError, httpx.RemoteProtocolError: the connection broke mid-body.
        """
        return _Body(self._response.content)

    def release(self) -> None:
        """End the exchange."""
        if self._close:
            self._response.close()
        else:
            self._response.release()


class _Body:
    """``StreamReader.iter_any()`` with aiohttp's errors as httpx's, in one awaitable per read
    (no async generator around aiohttp's iterator: a relayed stream makes one read per event)."""

    __slots__ = ("_content",)

    def __init__(self, content: aiohttp.StreamReader) -> None:
        self._content = content

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> bytes:
        try:
            data = await self._content.readany()
        except aiohttp.ClientError as exc:
            raise transport_error(exc) from exc
        if not data:  # readany's end of the body
            raise StopAsyncIteration
        return data


def transport_error(exc: aiohttp.ClientError) -> httpx.TransportError:
    """The httpx transport exception for an aiohttp client error."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message)
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return httpx.ReadTimeout(message)
    if isinstance(exc, aiohttp.ClientConnectorError):
        # the OS's reason with the address, not aiohttp's "Cannot connect to host h:p
        # ssl:default [...]", whose "ssl:default" is wrong for the plain http:// upstreams
        # this client serves
        return httpx.ConnectError(f"cannot connect to {exc.host}:{exc.port}: {exc.os_error}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError("Server disconnected without sending a response.")
    if isinstance(exc, aiohttp.ClientResponseError):  # the response head did not parse
        return httpx.RemoteProtocolError(f"malformed HTTP response: {exc.message}")
    if isinstance(exc, aiohttp.ClientPayloadError):
        cut = _body_cut_short(exc.__cause__)
        if cut is not None:  # not aiohttp's "Response payload is not completed: <...Error: 400"
            return httpx.ReadError(f"closed before the end of the response body ({cut})")
        return httpx.RemoteProtocolError(message)
    return httpx.ReadError(message)


def _body_cut_short(cause: BaseException | None) -> str | None:
    """What was missing when the connection closed inside a response body (``cause``: the
    parser's error at the connection's end), or None for another payload error."""
    if isinstance(cause, TransferEncodingError):
        return "its chunked body's last chunk never came"
    if isinstance(cause, ContentLengthError):
        received = re.search(r"received \d+ of \d+ bytes", cause.message)
        return received.group(0) if received else "fewer bytes than its content-length"
    return None


class _Handler(ResponseHandler):
    """aiohttp's response protocol without two costs of each body read (a relayed stream makes
    one read per event):

    - the reader asks the protocol to resume reading after every read it takes from a buffer
      below its low-water mark, and aiohttp's ``resume_reading`` then feeds the parser an empty
      chunk and resumes the transport, paused or not (about 5 Python calls a read): here it does
      that only when reading is paused (``pause_reading``, or a buffer's hold), the only state
      in which the parser can hold unparsed bytes;
    - ``sock_read``: aiohttp cancels its read-timeout timer and starts a new one on every
      ``data_received``; here a read moves a deadline, and the one timer, when it fires, either
      raises the timeout (the deadline passed) or waits for the deadline (a timer a timeout
      period, not one a read). The timeout fires as aiohttp's would: ``sock_read`` seconds after
      the last bytes arrived.
    """

    _read_deadline = 0.0  # loop.time() at which the read timeout fires

    def resume_reading(self, resume_parser: bool = True) -> None:
        if self._reading_paused or self._buffer_paused:
            super().resume_reading(resume_parser)

    def _reschedule_timeout(self) -> None:
        timeout = self._read_timeout
        if not timeout:
            self._drop_timeout()
            return
        self._read_deadline = self._loop.time() + timeout
        if self._read_timeout_handle is None:
            self._read_timeout_handle = self._loop.call_at(self._read_deadline, self._read_timer)

    def _read_timer(self) -> None:
        if self._loop.time() < self._read_deadline:  # bytes arrived since the timer started
            self._read_timeout_handle = self._loop.call_at(self._read_deadline, self._read_timer)
            return
        self._read_timeout_handle = None
        self._on_read_timeout()


class _Connector(aiohttp.TCPConnector):
    """aiohttp's TCP connector, remembering which connections already carried an exchange; its
    connections speak through ``_Handler`` (aiohttp's own protocol if its connector ever stops
    building them with ``functools.partial(ResponseHandler, loop=...)``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._used: weakref.WeakSet[object] = weakref.WeakSet()
        factory = getattr(self, "_factory", None)
        if isinstance(factory, functools.partial) and factory.func is ResponseHandler:
            handler: Any = functools.partial(_Handler, *factory.args, **factory.keywords)
            self._factory = handler

    async def connect(self, req: Any, traces: Any, timeout: Any) -> aiohttp.connector.Connection:
        connection = await super().connect(req, traces, timeout)
        protocol = connection.protocol
        reused = protocol in self._used
        if not reused:
            self._used.add(protocol)
        holder = _REUSED.get()
        if holder is not None:
            holder[0] = reused
        return connection


class DirectUpstream:
    """One plain ``http://`` upstream's aiohttp session: keep-alive connections, at most
    ``max_connections``, idle ones closed after ``keepalive_s`` seconds.

    Args:
        base: the upstream URL (``http://host:port/prefix``); request targets follow its path.
        max_connections: the connection limit (the caller admits no more requests than this).
        connect_s, read_s: connect timeout, and the longest wait for each read (None: none).
        keepalive_s: seconds an idle connection is kept.
    """

    def __init__(
        self,
        base: str,
        max_connections: int,
        connect_s: float | None,
        read_s: float | None,
        keepalive_s: float,
    ) -> None:
        url = httpx.URL(base)
        self._origin = f"http://{url.netloc.decode('ascii')}"
        self._base_path = url.raw_path.split(b"?", 1)[0].rstrip(b"/").decode("ascii")
        self._max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=None, sock_connect=connect_s, sock_read=read_s
        )
        self._connector = _Connector(
            limit=max_connections, limit_per_host=0, keepalive_timeout=keepalive_s
        )
        self._session = self._new_session(self._connector)
        #: for a request sent once more: a connection it kept is closed when next asked for
        #: (no keep-alive time), so each such request opens a new one
        self._fresh: aiohttp.ClientSession | None = None
        self._urls: dict[str, URL] = {}

    def _new_session(self, connector: aiohttp.BaseConnector) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            auto_decompress=False,
            skip_auto_headers=_SKIP_AUTO_HEADERS,
            cookie_jar=aiohttp.DummyCookieJar(),  # one client's cookies never reach another
            trust_env=False,
        )

    def _url(self, target: str) -> URL:
        url = self._urls.get(target)
        if url is None:
            url = URL(self._origin + self._base_path + target, encoded=True)
            if "?" not in target and len(self._urls) < 1024:  # a query may carry an API key
                self._urls[target] = url
        return url

    async def send(
        self, method: str, target: str, headers: Sequence[tuple[bytes, bytes]], body: bytes
    ) -> DirectResponse:
        """Send a request and wait for its response's status line and headers.

        A pooled keep-alive connection the upstream closes just as the request goes out on it
        (servers close idle ones on their own clock: uvicorn after 5 s) fails with no response
        head; such a request is sent once more, on a new connection. A failure on a new
        connection is the upstream's answer and is raised.

        Args:
            method: the request method.
            target: the request target (path and query) as the client sent it, percent-encoded.
            headers: header pairs, sent in order after ``Host``.
            body: the request body.

        Raises:
            httpx.ConnectError, httpx.ConnectTimeout: no connection.
            httpx.ReadTimeout: no response head within the read timeout.
            httpx.ReadError, httpx.RemoteProtocolError: the connection failed or the response
                head did not parse.
        """
        pairs: list[tuple[str, str]] = []
        if not body and method in _BODY_METHODS:
            pairs.append(("Content-Length", "0"))
        pairs += [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]
        if body:
            pairs.append(("Content-Length", str(len(body))))
        url = self._url(target)
        reused = [False]
        token = _REUSED.set(reused)
        try:
            response = await self._session.request(method, url, headers=pairs, data=body or None)
        except _CLOSED_UNDER_REQUEST as exc:
            if isinstance(exc, aiohttp.ClientConnectorError) or not reused[0]:
                raise transport_error(exc) from exc
            logger.debug(
                "upstream %s closed a pooled connection as a request went out (%s): "
                "sending it again on a new connection",
                self._origin,
                exc,
            )
            if self._fresh is None:
                # aiohttp hands a connection back to the pool once the body is read; with no
                # keep-alive time a kept one is closed when next asked for, so a later retry
                # never goes out on it (force_close would add "Connection: close" to the
                # request, which is relayed byte for byte)
                connector = aiohttp.TCPConnector(
                    limit=self._max_connections, limit_per_host=0, keepalive_timeout=0
                )
                self._fresh = self._new_session(connector)
            try:
                response = await self._fresh.request(method, url, headers=pairs, data=body or None)
            except aiohttp.ClientError as retry_exc:
                raise transport_error(retry_exc) from retry_exc
            return DirectResponse(response, close=True)
        except aiohttp.ClientError as exc:
            raise transport_error(exc) from exc
        finally:
            _REUSED.reset(token)
        return DirectResponse(response)

    async def aclose(self) -> None:
        """Close the session and its connections."""
        await self._session.close()
        if self._fresh is not None:
            await self._fresh.close()
