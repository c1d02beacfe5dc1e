"""``promptcache engine serve`` against slow clients: connections that send their request head a
byte at a time ("slowloris") are closed after ``--header-timeout``, and at the connection limit
a new connection replaces the one waiting longest, so real requests are still answered (a real
server subprocess limited to 256 open files, 300 slow loopback connections)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from server_support import TINYSTORIES
from slow_client_support import SlowClients, limit_open_files


def test_slow_clients_cannot_hold_the_engines_connections() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    command = [
        str(Path(sys.executable).with_name("promptcache")), "engine", "serve",
        "--model", str(TINYSTORIES), "--port", str(port), "--threads", "1",
        "--header-timeout", "2", "--max-client-connections", "100",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=limit_open_files(256)
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.2)
        with SlowClients(port, 300, interval_s=0.1, duration_s=40) as slow:
            for _ in range(5):
                models = httpx.get(f"{url}/v1/models", timeout=10)
                assert models.status_code == 200 and models.json()["data"]
            assert slow.wait_all_closed(30), f"{slow.open_count()} slow connections still open"
            answers = list(slow.closed.values())
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    timed_out = [a for a in answers if a.startswith(b"HTTP/1.1 408 Request Timeout\r\n")]
    assert timed_out and all(a in (b"", timed_out[0]) for a in answers)
    assert "closed a connection that sent no complete request head within 2 s" in stderr
    assert "100 connections open (--max-client-connections): closed the one waiting" in stderr
    assert "Traceback" not in stderr
