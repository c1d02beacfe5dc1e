"""Free TCP ports for the servers a test starts itself (importable from any test folder, as this
file's folder is on ``sys.path``).

Binding port 0 and closing the socket before asking again lets the kernel, which picks a free
port at random, give the same port twice: about 1 pair in 20,000 on Linux, and a test that
starts a proxy and two replicas asks three times. ``free_ports`` keeps every socket bound until
all ports are picked, so the ports it returns are distinct.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_ports(
    count: int, host: str = "127.0.0.1", family: socket.AddressFamily = socket.AF_INET
) -> list[int]:
    """``count`` distinct ports on ``host`` that nothing listens on now."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(family)) for _ in range(count)]
        for sock in socks:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in socks]
