"""``promptcache.listen.listen_socket``: the socket both servers bind before anything slow
(loading a model, opening the log) already listens, so a client connecting meanwhile waits
instead of being refused (the proxy's start-up check of an engine still loading finds it)."""

from __future__ import annotations

import socket

from promptcache.listen import listen_socket


def test_a_client_can_connect_before_the_server_runs() -> None:
    sock = listen_socket("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            client.sendall(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n")
            accepted, _ = sock.accept()  # what uvicorn does once it starts
            with accepted:
                assert accepted.recv(64).startswith(b"GET /health")
    finally:
        sock.close()
