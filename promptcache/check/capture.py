"""The capture endpoint: a local HTTP server that records every request the checked program sends.

It listens on ``127.0.0.1`` on a free port and serves three mounts, one per vendor:
``/anthropic`` (the child's ``ANTHROPIC_BASE_URL``), ``/openai/v1`` (``OPENAI_BASE_URL``) and
``/gemini`` (``GOOGLE_GEMINI_BASE_URL``, the variable the ``google-genai`` client reads,
https://github.com/googleapis/python-genai/blob/main/google/genai/_base_url.py , checked
2026-12-03). Every request is recorded (:class:`CapturedRequest`: body, path, headers, the call
site and run the in-process hook put in its headers) and answered with a canned response
(``promptcache.check.canned``), or, with ``forward=True``, sent on to the real upstream
(``promptcache.check.forward``) and its answer relayed, streaming included.

It is the standard library's ``ThreadingHTTPServer`` (HTTP/1.1, keep-alive) in a daemon thread
of the ``promptcache check`` process: the child's requests and those of its forked workers
reach it over loopback wherever they come from, it needs none of the optional extras, and it
adds well under a millisecond per request (``benchmarks/check_overhead.py``).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from promptcache.hosts import http_url

from .canned import canned_response, route_api
from .child import (
    HEADER_DRAWN,
    HEADER_LISTINGS,
    HEADER_NO_CLOCK,
    HEADER_PID,
    HEADER_RUN,
    HEADER_SITE,
    HEADER_UPSTREAM,
)
from .forward import Forwarder

__all__ = ["VENDOR_MOUNTS", "CallSite", "CaptureServer", "CapturedRequest"]

#: Mount -> the path a client's base URL ends with (OpenAI's base URL includes ``/v1``).
VENDOR_MOUNTS: dict[str, str] = {"anthropic": "", "openai": "/v1", "gemini": ""}


@dataclass(frozen=True)
class CallSite:
    """Where the user's code sent a request from: the first stack frame in the user's code.

    Attributes:
        path: the file's absolute path.
        line: 1-based line number.
        function: the code object's qualified name (``StoryTime.ask``).
        callers: the user's frames that called it, innermost first (``(path, line,
            function)``; up to two): where a helper that wraps the client was called from.
    """

    path: str
    line: int
    function: str
    callers: tuple[tuple[str, int, str], ...] = ()

    @classmethod
    def parse(cls, header: str | None) -> CallSite | None:
        """Read the hook's ``x-promptcache-check-site`` header (None when absent or bad)."""
        if not header:
            return None
        parts = unquote(header).split("\t")
        if len(parts) < 3 or len(parts) % 3 or not all(p.isdigit() for p in parts[1::3]):
            return None
        frames = [(parts[i], int(parts[i + 1]), parts[i + 2]) for i in range(0, len(parts), 3)]
        return cls(*frames[0], callers=tuple(frames[1:]))


@dataclass
class CapturedRequest:
    """One request the endpoint received.

    Attributes:
        seq: its number among all requests received (arrival order, from 0).
        run: the run it belongs to (the hook's header, else the run going on when it came).
        vendor: the mount: ``anthropic``, ``openai`` or ``gemini``.
        method, path, query: the vendor path (``/v1/messages``), without the mount.
        api: the wire format (``anthropic``, ``openai_chat``, ``openai_responses``,
            ``openai_completions``, ``gemini``), None for routes that carry no prompt.
        headers: lower-cased names; the hook's own headers included.
        body: the raw body bytes.
        site: the call site the hook reported, None when it reported none.
        pid: the process id the hook reported (perturbed like ``os.getpid()``), or None.
        listings: directory listings of user code the hook had reordered before it, or None.
        drawn: whether the sending process had drawn from ``random``, ``uuid4``/``uuid1`` or
            ``secrets`` before it, the HTTP and LLM clients' own draws left out (``child.
            CLIENT_MODULES``); None when the hook did not say.
        hooked: whether the request carried the hook's headers at all.
        clock_problem: why the hook could not move the sending process's clock ("" when it
            did, or had not to).
        status: the HTTP status answered.
    """

    seq: int
    run: int
    vendor: str
    method: str
    path: str
    query: str
    api: str | None
    headers: dict[str, str]
    body: bytes
    site: CallSite | None
    pid: int | None
    listings: int | None
    hooked: bool
    status: int = 0
    json_body: Any = field(default=None, repr=False)
    clock_problem: str = ""
    drawn: bool | None = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: without TCP_NODELAY the second waits for the
    # client's delayed ACK (tens of ms per request).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return  # the program's own output is what the user sees

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        owner = self.server.owner
        body = self._read_body()
        raw_path, _, query = self.path.partition("?")
        mount, _, rest = raw_path.lstrip("/").partition("/")
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        if mount not in VENDOR_MOUNTS:
            self._send(404, "application/json", b'{"error": {"message": "unknown mount"}}')
            return
        request = owner.record(mount, self.command, "/" + rest, query, headers, body, parsed)
        request.api = route_api(mount, self.command, request.path)
        # the status is recorded before the answer is written: a client that has its answer
        # (and check, once the program exits) reads it, not the 0 it starts at
        if owner.forwarder is not None:
            owner.forwarder.relay(self, request)
        else:
            _, answer = canned_response(
                mount, self.command, request.path, query, parsed, request.seq, len(body)
            )
            request.status = answer.status
            self._send(answer.status, answer.content_type, answer.body)

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's listen backlog is 5: a program opening dozens of connections at once (a
    # thread pool of 64 workers) had some reset by the kernel before they were accepted
    request_queue_size = 1024
    owner: CaptureServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A program that drops its connection (killed at --timeout or by Ctrl-C mid-request, a
        # client that resets a keep-alive socket) is not check's failure: socketserver would
        # print a traceback from the endpoint's thread into the program's output.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class CaptureServer:
    """The endpoint; use as a context manager (``with CaptureServer() as server:``).

    Args:
        forward: send every request on to the real upstream instead of answering it.
        upstreams: mount -> upstream base URL for ``forward`` (the base URL a client would
            use: ``https://api.openai.com/v1`` for ``openai``); see
            ``promptcache.check.forward.default_upstreams``.

    Thread-safe: requests arrive on the server's threads while the runner reads them.
    """

    def __init__(
        self, *, forward: bool = False, upstreams: Mapping[str, str] | None = None
    ) -> None:
        self.current_run = 0
        self.forwarder = Forwarder(upstreams) if forward else None
        self._requests: list[CapturedRequest] = []
        self._seq_by_run: dict[int, int] = {}
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="promptcache-check-capture", daemon=True
        )

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host, port = self._server.server_address[:2]
        return http_url(str(host), int(port))

    def base_urls(self) -> dict[str, str]:
        """The child's ``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL`` and
        ``GOOGLE_GEMINI_BASE_URL``."""
        return {
            "ANTHROPIC_BASE_URL": f"{self.origin}/anthropic",
            "OPENAI_BASE_URL": f"{self.origin}/openai/v1",
            "GOOGLE_GEMINI_BASE_URL": f"{self.origin}/gemini",
        }

    def __enter__(self) -> CaptureServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and close the socket (and the forwarder's connections)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()
        if self.forwarder is not None:
            self.forwarder.close()

    def record(
        self,
        vendor: str,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        body: bytes,
        parsed: Any,
    ) -> CapturedRequest:
        """Store one request (called by the handler) and return it."""
        run_header = headers.get(HEADER_RUN, "")
        pid = headers.get(HEADER_PID, "")
        listings = headers.get(HEADER_LISTINGS, "")
        drawn = headers.get(HEADER_DRAWN, "")
        with self._lock:
            run = int(run_header) if run_header.isdigit() else self.current_run
            seq = self._seq_by_run.get(run, 0)
            self._seq_by_run[run] = seq + 1
            request = CapturedRequest(
                seq=seq,
                run=run,
                vendor=vendor,
                method=method,
                path=path,
                query=query,
                api=None,
                headers=headers,
                body=body,
                site=CallSite.parse(headers.get(HEADER_SITE)),
                pid=int(pid) if pid.isdigit() else None,
                listings=int(listings) if listings.isdigit() else None,
                hooked=bool(run_header),
                json_body=parsed,
                clock_problem=unquote(headers.get(HEADER_NO_CLOCK, "")),
                drawn={"1": True, "0": False}.get(drawn),
            )
            self._requests.append(request)
        return request

    def requests(self, run: int | None = None) -> list[CapturedRequest]:
        """What was received (of one run, when given), in arrival order."""
        with self._lock:
            return [r for r in self._requests if run is None or r.run == run]

    @staticmethod
    def upstream_header(request: CapturedRequest) -> str | None:
        """The original URL of a request the hook rerouted from a vendor host, else None."""
        return request.headers.get(HEADER_UPSTREAM)
