"""Limits that keep slow, idle or too many clients from holding a server's connections, for
``promptcache proxy`` and ``promptcache engine serve`` (both run uvicorn through
``promptcache.listen.run_uvicorn``).

uvicorn starts no timer on a new connection before its first response, so a client that sends
its request head a byte at a time ("slowloris") holds the connection, and its file descriptor,
for as long as it likes; enough of them exhaust the process's descriptors and every real request
fails. Checking ``--auth-token`` / ``--api-key`` does not help: they are read from the head.
:func:`protocol_class` wraps uvicorn's HTTP protocol with:

- a request-head timeout: a connection whose request line and headers are not complete
  ``head_timeout_s`` after it opened (or, on a kept-alive connection, after the next request's
  first byte) gets ``408`` and is closed; a head over ``max_head_bytes`` gets ``431`` and is
  closed;
- a body timeout: a request body not complete ``body_timeout_s`` after its head gets ``408``
  and is closed (the app sees the client disconnect); a request answered before its body has
  all arrived (413) still has the rest of that body read and dropped, under the same timer,
  before the connection waits for its next request head;
- a connection limit: with ``max_connections`` open, a new connection closes the one that has
  waited longest for a request head (a slow client, or an idle keep-alive one); when every
  connection is busy with a request, the new one gets ``503`` and is closed;
- uvicorn's own idle keep-alive timeout, ``keep_alive_s``.

Slowloris and its defences: https://en.wikipedia.org/wiki/Slowloris_(computer_security) and
nginx's ``client_header_timeout`` / ``client_body_timeout`` (60 s each,
https://nginx.org/en/docs/http/ngx_http_core_module.html#client_header_timeout, checked
2026-12-03). The defaults here are shorter: LLM API clients send their whole request at once.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from promptcache.formatting import plural

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEAD_TIMEOUT_S",
    "DEFAULT_KEEP_ALIVE_S",
    "MAX_HEAD_BYTES",
    "ClientLimits",
    "default_max_connections",
    "protocol_class",
    "raise_open_files_limit",
]

logger = logging.getLogger("promptcache.server")

DEFAULT_HEAD_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 60.0
#: uvicorn's default idle keep-alive.
DEFAULT_KEEP_ALIVE_S = 5.0
#: Request line and headers, in bytes: h11's default limit is 16 KiB, llama.cpp's server 8 KiB.
MAX_HEAD_BYTES = 64 * 1024
#: File descriptors kept free of client connections (log files, sockets to upstreams, imports).
RESERVED_FDS = 128
#: The largest default connection limit.
MAX_DEFAULT_CONNECTIONS = 4096
#: The open-files limit :func:`raise_open_files_limit` asks for at most.
WANTED_OPEN_FILES = 65536


@dataclass(frozen=True)
class ClientLimits:
    """What a server allows its clients (see the module docstring).

    Attributes:
        head_timeout_s: seconds for a request head to arrive complete.
        body_timeout_s: seconds for a request body to arrive complete after its head.
        keep_alive_s: seconds an idle keep-alive connection stays open.
        max_connections: client connections open at once; None = :func:`default_max_connections`.
        max_head_bytes: largest request head (request line and headers) in bytes.
    """

    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    keep_alive_s: float = DEFAULT_KEEP_ALIVE_S
    max_connections: int | None = None
    max_head_bytes: int = MAX_HEAD_BYTES


def raise_open_files_limit(wanted: int = WANTED_OPEN_FILES) -> int:
    """Raise this process's soft limit on open files towards its hard limit (at most
    ``wanted``), as servers do at start; the soft limit after (``ulimit -n``). Unchanged where
    the platform has no such limit."""
    try:
        import resource
    except ImportError:  # Windows
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            soft = ceiling
        except (ValueError, OSError):
            pass
    return wanted if soft == resource.RLIM_INFINITY else int(soft)


def default_max_connections(open_files: int, fds_per_connection: int = 1) -> int:
    """The connection limit that leaves :data:`RESERVED_FDS` of ``open_files`` descriptors free:
    ``(open_files - RESERVED_FDS) // fds_per_connection`` (the proxy takes 2: a client's and its
    upstream's), between 16 and :data:`MAX_DEFAULT_CONNECTIONS`."""
    return max(16, min(MAX_DEFAULT_CONNECTIONS, (open_files - RESERVED_FDS) // fds_per_connection))


def _response(status: bytes, kind: str, message: str) -> bytes:
    """A whole HTTP response that closes the connection, with an error body the official
    OpenAI, Anthropic and Gemini clients all read a message from (``error.message``): these
    answers go out before the request's route is known, so no one vendor's shape is chosen."""
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
    )


def _all_busy(count: int, noun: str) -> str:
    """That every one of ``count`` connections is busy: ``all 4 client connections this server
    allows are busy with requests``, or for a limit of one ``the 1 client connection this server
    allows is busy with a request``. ``noun`` is in the singular ("connection", "client
    connection this server allows"); its first "connection" takes the plural's "s"."""
    if count == 1:
        return f"the 1 {noun} is busy with a request"
    return f"all {count:,} {noun.replace('connection', 'connections', 1)} are busy with requests"


class _Notes:
    """Logs the first time each limit acts (a warning), later ones at debug level: an attack
    would otherwise write a line per connection."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def note(self, kind: str, message: str) -> None:
        if kind in self.seen:
            logger.debug(message)
            return
        self.seen.add(kind)
        logger.warning("%s (the next ones are logged at debug level)", message)


def protocol_class(limits: ClientLimits, max_connections: int, base: type | None = None) -> type:
    """uvicorn's HTTP protocol class (``httptools``' when it is installed, else ``h11``'s, as
    uvicorn's ``http="auto"``, or ``base``) with ``limits`` applied; pass it as
    ``uvicorn.Config(http=...)``. Each call makes a class with its own connection registry."""
    if base is None:
        try:
            from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

            base = HttpToolsProtocol
        except ImportError:
            from uvicorn.protocols.http.h11_impl import H11Protocol

            base = H11Protocol
    # connections waiting for a request head, the longest-waiting first (dicts keep order)
    waiting: dict[Any, None] = {}
    closing: set[Any] = set()  # closed here, their connection_lost not yet run
    notes = _Notes()
    head_s, body_s = limits.head_timeout_s, limits.body_timeout_s
    head_late = _response(
        b"408 Request Timeout",
        "invalid_request_error",
        f"the request line and headers did not all arrive within {head_s:g} s of the "
        "connection (the server's --header-timeout); send the request head at once",
    )
    body_late = _response(
        b"408 Request Timeout",
        "invalid_request_error",
        f"the request body did not all arrive within {body_s:g} s of its headers (the server's "
        "--body-timeout); send the body at once, or raise --body-timeout",
    )
    head_large = _response(
        b"431 Request Header Fields Too Large",
        "invalid_request_error",
        f"the request line and headers are larger than {limits.max_head_bytes:,} bytes; send "
        "fewer or shorter headers",
    )
    busy = _response(
        b"503 Service Unavailable",
        "overloaded_error",
        f"{_all_busy(max_connections, 'client connection this server allows')} (its "
        "--max-client-connections); retry shortly, or raise --max-client-connections",
    )

    class Limited(base):  # type: ignore[misc, valid-type]
        _refused = False
        _head_timer: Any = None
        _body_timer: Any = None
        _seen_cycle: Any = None
        _head_bytes = 0
        #: answered before its body was all read (a 413): the rest of that body is still to
        #: come, and the next head only after it
        _body_after_response = False

        def connection_made(self, transport: Any) -> None:
            if len(self.server_state.connections) - len(closing) >= max_connections:
                victim = next(iter(waiting), None)
                if victim is None:
                    self._refused = True
                    transport.write(busy)
                    transport.close()
                    notes.note(
                        "refused",
                        f"refused a connection: {_all_busy(max_connections, 'connection')} "
                        "(--max-client-connections)",
                    )
                    return
                victim._end(None)
                notes.note(
                    "evicted",
                    f"{plural(max_connections, 'connection', grouped=True)} open "
                    "(--max-client-connections): closed "
                    "the one waiting longest for a request, for a new one",
                )
            super().connection_made(transport)
            self._await_head(timer=True)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            self._cancel_timers()
            closing.discard(self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self in waiting:
                if self._head_timer is None:  # the first byte after a kept-alive response
                    self._start_head_timer()
                self._head_bytes += len(data)
            super().data_received(data)
            cycle = self.cycle
            if cycle is not None and cycle is not self._seen_cycle:  # a head is complete
                self._seen_cycle = cycle
                self._cancel_head()
                if cycle.more_body:
                    self._body_timer = self.loop.call_later(body_s, self._body_expired)
            elif self._head_timer is not None and self._head_bytes > limits.max_head_bytes:
                notes.note(
                    "head-size",
                    f"closed a connection whose request head passed {limits.max_head_bytes} bytes",
                )
                self._end(head_large)
                return
            if self._body_timer is not None and not self._seen_cycle.more_body:
                self._body_timer.cancel()
                self._body_timer = None
            if self._body_after_response and self._body_ended():
                self._body_after_response = False  # the answered request's body has ended
                if not self.transport.is_closing():
                    self._await_head(timer=False)

        def _body_ended(self) -> bool:
            """Whether the current request's body has all arrived. h11 does not tell the cycle
            of a body that ends after the response (it drops it and starts the next cycle)."""
            if not self._seen_cycle.more_body:
                return True
            conn = getattr(self, "conn", None)  # h11's connection; httptools has none
            if conn is None:
                return False
            import h11  # uvicorn's dependency, as the h11 protocol is

            return bool(conn.their_state is not h11.SEND_BODY)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            cycle = self._seen_cycle
            if cycle is not None and cycle.more_body:
                # answered early (413): the bytes still coming are that request's body, which
                # uvicorn reads and drops, not a next request's head (the body timer runs on)
                self._body_after_response = True
                return
            if not self.transport.is_closing() and not getattr(self, "pipeline", None):
                # Idle until the next request: uvicorn's keep-alive timer closes it if nothing
                # comes; the head timer starts with the next request's first byte.
                self._await_head(timer=False)

        def _await_head(self, *, timer: bool) -> None:
            """Mark the connection as waiting for a request head (so it may be replaced at the
            connection limit), with the head timer running from now when ``timer``."""
            self._cancel_head()
            waiting[self] = None
            if timer:
                self._start_head_timer()

        def _start_head_timer(self) -> None:
            self._head_bytes = 0
            self._head_timer = self.loop.call_later(head_s, self._head_expired)

        def _cancel_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            waiting.pop(self, None)

        def _cancel_timers(self) -> None:
            self._cancel_head()
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _head_expired(self) -> None:
            self._head_timer = None
            notes.note(
                "head-timeout",
                f"closed a connection that sent no complete request head within {head_s:g} s "
                "(--header-timeout)",
            )
            self._end(head_late)

        def _body_expired(self) -> None:
            self._body_timer = None
            cycle = self._seen_cycle
            if cycle is None or not cycle.more_body:
                return
            notes.note(
                "body-timeout",
                f"closed a connection whose request body was not complete within {body_s:g} s "
                "(--body-timeout)",
            )
            self._end(None if cycle.response_started else body_late)

        def _end(self, response: bytes | None) -> None:
            """Close the connection, after ``response`` when given."""
            self._cancel_timers()
            transport = self.transport
            if transport is None or transport.is_closing():
                return
            if response is not None:
                transport.write(response)
            transport.close()
            closing.add(self)

    Limited.__name__ = Limited.__qualname__ = f"Limited{base.__name__}"
    return Limited
