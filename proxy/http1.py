"""A lean HTTP/1.1 client for plain ``http://`` upstreams: an asyncio protocol and httptools.

The proxy spends most of its CPU per request in its upstream client: httpx, httpcore, h11 and
anyio run about 1,900 Python calls for one streamed chat completion of 15 SSE events (profiled
under ``benchmarks/proxy_routing.py``'s chat workload, 2026-12-03). This client does the same
exchange in a few dozen: ``httptools`` (the C parser uvicorn uses, llhttp) reads the response,
and a response's body is handed over as whatever arrived in one read, so the relay sends one
message to the client per upstream read instead of one per HTTP chunk (same bytes, same order).

``forward.UpstreamPool`` uses it for ``http://`` upstreams reached directly (loopback ones, or
any when no proxy environment variable applies) and keeps httpx for the rest (TLS, proxies,
``HEAD``). The contract is httpx's, so the forwarding code above does not tell them apart:

- errors are httpx's transport exceptions (``ConnectError``, ``ConnectTimeout``,
  ``ReadTimeout``, ``WriteTimeout``, ``ReadError``, ``RemoteProtocolError``), raised from
  ``Http1Connection.connect``, ``send`` and the body iterator;
- ``Http1Response`` has ``status_code``, ``headers.raw`` / ``headers.get`` and ``aiter_raw()``
  (the body with the chunked framing removed, no content decoding).

Requests go out as one write (head and body together; a body over ``JOIN_BYTES`` in a second
write) with the headers httpx would send: ``Host`` first, then ``Content-Length: 0`` for an
empty ``POST``, ``PUT`` or ``PATCH``, then the given headers, then ``Content-Length`` of a
non-empty body. RFC 9112 is what httptools implements; 1xx interim responses are skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import cast

import httptools
import httpx

__all__ = ["Http1Connection", "Http1Response", "RawHeaders"]

#: Response body bytes buffered before the connection stops reading from the socket.
MAX_BUFFERED = 256 * 1024
#: Request bodies up to this size go out in the same write as the head.
JOIN_BYTES = 64 * 1024
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class RawHeaders:
    """A response's header pairs as received (``raw``), with httpx's case-insensitive ``get``."""

    __slots__ = ("raw",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw

    def get(self, name: str, default: str = "") -> str:
        """The first value of header ``name`` (any case), decoded as Latin-1, else ``default``."""
        key = name.lower().encode("latin-1")
        for k, v in self.raw:
            if k.lower() == key:
                return v.decode("latin-1")
        return default


class Http1Response:
    """One response, its body not yet read; ``close`` hands the connection back or closes it."""

    __slots__ = ("_connection", "_read_timeout", "headers", "status_code")

    def __init__(
        self,
        connection: Http1Connection,
        status: int,
        headers: RawHeaders,
        read_timeout: float | None,
    ) -> None:
        self._connection = connection
        self._read_timeout = read_timeout
        self.status_code = status
        self.headers = headers

    def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives: each item everything that arrived in one read (never empty).

        Raises:
            httpx.ReadTimeout: nothing arrived for the read timeout.
            httpx.ReadError, httpx.RemoteProtocolError: the connection broke mid-body.
        """
        return self._connection.body(self._read_timeout)

    @property
    def complete(self) -> bool:
        """Whether the whole body was read."""
        return self._connection.complete


class Http1Connection(asyncio.Protocol):
    """One keep-alive connection to an upstream, carrying one exchange at a time."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        #: the connection is gone (or going): never to be reused
        self.closed = False
        #: exchanges completed on it (> 0: a reused connection)
        self.exchanges = 0
        #: loop time it went idle
        self.idle_since = 0.0
        self._reset()
        self._waiter: asyncio.Future[object] | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._drained: asyncio.Future[object] | None = None

    def _reset(self) -> None:
        self._active = False
        self.answered = False  # a byte of the current exchange's response arrived
        self.complete = False
        self._keep_alive = False
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._headers_done = False
        self._framed = True  # the body's end is known (length, chunked, or no body)
        self._body: list[bytes] = []
        self._buffered = 0
        self._error: httpx.TransportError | None = None

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    async def connect(cls, host: str, port: int, timeout: float | None) -> Http1Connection:
        """A new connection to ``host:port``.

        Raises:
            httpx.ConnectTimeout: not connected within ``timeout`` seconds.
            httpx.ConnectError: refused, unreachable, or the host does not resolve.
        """
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(loop.create_connection(cls, host, port), timeout)
        except asyncio.TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {host}:{port} within {timeout:g} s"
            ) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from exc
        return protocol

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if not self._active:
            # Bytes (or a close) on an idle connection: the upstream is ending it.
            self._close()
            return
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc}"))
            self._close()
        if self._buffered > MAX_BUFFERED and not self._reading_paused and self.transport:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._active and not self.complete:
            if self._headers_done and not self._framed and exc is None:
                self.complete = True  # a body delimited by the connection's end
            elif exc is not None:
                self._fail(httpx.ReadError(str(exc) or type(exc).__name__))
            elif self._headers_done:
                self._fail(
                    httpx.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                )
            else:
                self._fail(
                    httpx.RemoteProtocolError("Server disconnected without sending a response.")
                )
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # -- httptools callbacks -----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._headers = []  # an interim response: the final one follows
            return
        self._status = status
        self._headers_done = True
        if status not in (204, 304):
            self._framed = any(
                k.lower() == b"content-length"
                or (k.lower() == b"transfer-encoding" and b"chunked" in v.lower())
                for k, v in self._headers
            )

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)

    def on_message_complete(self) -> None:
        if self._headers_done:
            self.complete = True
            # read here: the parser forgets the message once this callback returns
            self._keep_alive = self._parser.should_keep_alive()

    # -- an exchange -------------------------------------------------------------------------

    async def send(
        self,
        method: str,
        target: bytes,
        host: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
        timeouts: Mapping[str, float | None],
    ) -> Http1Response:
        """Write a request and wait for its response's status line and headers.

        Args:
            method: the request method.
            target: the request target (path and query), as sent.
            host: the ``Host`` header's value.
            headers: header pairs, sent in order after ``Host``.
            body: the request body.
            timeouts: httpx's timeout dict (``write`` and ``read`` are used).

        Raises:
            httpx.WriteTimeout: the upstream did not take the request in time.
            httpx.ReadTimeout: no response head within the read timeout.
            httpx.ReadError, httpx.RemoteProtocolError: the connection failed first.
        """
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        self._reset()
        self._active = True
        lines = [method.encode(), b" ", target, b" HTTP/1.1\r\nHost: ", host, b"\r\n"]
        if not body and method in _BODY_METHODS:
            lines.append(b"Content-Length: 0\r\n")
        for name, value in headers:
            lines += (name, b": ", value, b"\r\n")
        if body:
            lines += (b"Content-Length: ", str(len(body)).encode(), b"\r\n")
        lines.append(b"\r\n")
        if len(body) <= JOIN_BYTES:
            lines.append(body)
            transport.write(b"".join(lines))
        else:
            transport.write(b"".join(lines))
            transport.write(body)
        if self._writing_paused and not self.closed:
            self._drained = self._loop.create_future()
            if not await self._wait_for(self._drained, timeouts.get("write")):
                raise httpx.WriteTimeout("the upstream did not read the request body in time")
        read_timeout = timeouts.get("read")
        while not self._headers_done:
            if self._error is not None:
                raise self._error
            await self._next(read_timeout)
        return Http1Response(self, self._status, RawHeaders(self._headers), read_timeout)

    async def body(self, read_timeout: float | None) -> AsyncIterator[bytes]:
        """The current response's body (see ``Http1Response.aiter_raw``)."""
        while True:
            if self._body:
                chunks, self._body, self._buffered = self._body, [], 0
                if self._reading_paused and self.transport is not None:
                    self._reading_paused = False
                    self.transport.resume_reading()
                yield chunks[0] if len(chunks) == 1 else b"".join(chunks)
            elif self.complete:
                return
            elif self._error is not None:
                raise self._error
            else:
                await self._next(read_timeout)

    def release(self) -> bool:
        """End the current exchange; True when the connection can carry another one (the
        response was read whole and both sides keep it alive), else it is closed."""
        reusable = self.complete and self._keep_alive and self._error is None and not self.closed
        self._active = False
        self._body = []
        if reusable:
            self.exchanges += 1
            self.idle_since = self._loop.time()
            self._parser = httptools.HttpResponseParser(self)
        else:
            self._close()
        return reusable

    def close(self) -> None:
        """Close the connection (an idle one, or abandoning the current exchange)."""
        self._active = False
        self._close()

    # -- waiting -----------------------------------------------------------------------------

    async def _next(self, timeout: float | None) -> None:
        """Wait for the next bytes, the end, or an error of the current exchange.

        Raises:
            httpx.ReadTimeout: none of them within ``timeout`` seconds.
        """
        self._waiter = self._loop.create_future()
        try:
            if not await self._wait_for(self._waiter, timeout):
                raise httpx.ReadTimeout(f"no data from the upstream within {timeout:g} s")
        finally:
            self._waiter = None

    async def _wait_for(self, future: asyncio.Future[object], timeout: float | None) -> bool:
        """Await ``future``; False if ``timeout`` seconds passed first."""
        if timeout is None:
            await future
            return True
        timer = self._loop.call_later(timeout, _expire, future)
        try:
            await future
        finally:
            timer.cancel()
        return not future.cancelled() and future.result() is None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: httpx.TransportError) -> None:
        if self._error is None:
            self._error = error

    def _close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


_EXPIRED = object()


def _expire(future: asyncio.Future[object]) -> None:
    if not future.done():
        future.set_result(_EXPIRED)
