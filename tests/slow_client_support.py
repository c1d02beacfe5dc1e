"""Slow clients for the server tests (``promptcache proxy``, ``promptcache engine serve``): many
loopback connections that send a request head one byte at a time and never finish it
("slowloris"), and a limit on a server subprocess's open files, so that holding its descriptors
is within reach of a bounded test."""

from __future__ import annotations

import contextlib
import resource
import socket
import threading
import time
from collections.abc import Callable

#: What each slow connection sends, a byte at a time: a head whose last header never ends.
SLOW_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100_000


def limit_open_files(count: int) -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child may open at most ``count`` files
    (soft and hard limit, so the child cannot raise it)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))

    return limit


class SlowClients:
    """``count`` connections to ``port`` on 127.0.0.1, each sending ``SLOW_HEAD`` at one byte
    per ``interval_s``, for at most ``duration_s``; records which ones the server closed and
    what it answered them. Use as a context manager (the sender runs in a thread)."""

    def __init__(
        self, port: int, count: int, *, interval_s: float = 0.1, duration_s: float = 30.0
    ) -> None:
        self.port = port
        self.count = count
        self.interval_s = interval_s
        self.duration_s = duration_s
        self.sockets: list[socket.socket] = []
        self.closed: dict[int, bytes] = {}  # index -> what the server sent before closing
        self._received: dict[int, bytes] = {}
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SlowClients:
        for _ in range(self.count):
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            sock.setblocking(False)
            self.sockets.append(sock)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in self.sockets:
            sock.close()

    def open_count(self) -> int:
        with self.lock:
            return self.count - len(self.closed)

    def wait_all_closed(self, timeout_s: float) -> bool:
        """Whether the server closed every connection within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.open_count() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.open_count() == 0

    def _run(self) -> None:
        ends = time.monotonic() + self.duration_s
        position = 0
        while not self._stop.is_set() and time.monotonic() < ends and self.open_count():
            for index, sock in enumerate(self.sockets):
                if index in self.closed:
                    continue
                self._check(index, sock)
                if index in self.closed or position >= len(SLOW_HEAD):
                    continue
                with contextlib.suppress(BlockingIOError):
                    try:
                        sock.send(SLOW_HEAD[position : position + 1])
                    except OSError:
                        self._mark(index, b"")
            position += 1
            self._stop.wait(self.interval_s)

    def _check(self, index: int, sock: socket.socket) -> None:
        """Note a connection the server closed (EOF or reset), with what it sent first."""
        while True:
            try:
                data = sock.recv(4096)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._mark(index, self._received.get(index, b""))
                return
            self._received[index] = self._received.get(index, b"") + data

    def _mark(self, index: int, received: bytes) -> None:
        with self.lock:
            self.closed.setdefault(index, received)
