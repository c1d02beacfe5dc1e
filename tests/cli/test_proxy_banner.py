"""`promptcache proxy` prints its banner only once it listens, with a URL a client can use."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from promptcache.cli import cli
from promptcache.hosts import http_url


def _free_port(family: socket.AddressFamily = socket.AF_INET, host: str = "127.0.0.1") -> int:
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _banner_of_a_running_proxy(args: list[str], url: str) -> str:
    """Start the proxy, wait until ``url`` answers, stop it with Ctrl-C; its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "from promptcache.cli import main; main()", "proxy", *args],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/nothing-here", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "proxy did not start"
                time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    return stderr


def _banner_with_config(config: Path) -> tuple[int, str]:
    """The port and banner of a proxy started with ``--config config`` (no log)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    return port, _banner_of_a_running_proxy(
        ["--config", str(config), "--port", str(port), "--no-log"], url
    )


def test_a_port_in_use_prints_the_error_and_no_banner(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        result = CliRunner().invoke(
            cli,
            ["proxy", "--upstream", "http://user:pw@127.0.0.1:8000", "--port", port, "--no-log"],
        )
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: the address is already in use (another "
        "server?): stop it or pick another --port"
    ]
    assert "user:pw" not in result.output


def test_the_banner_masks_credentials_and_follows_the_bind() -> None:
    port = _free_port()
    stderr = _banner_of_a_running_proxy(
        ["--upstream", "http://user:pw@127.0.0.1:8000", "--port", str(port), "--no-log"],
        f"http://127.0.0.1:{port}",
    )
    assert stderr.splitlines()[0] == (
        f"promptcache proxy on http://127.0.0.1:{port} -> http://***@127.0.0.1:8000"
    )
    assert "user:pw" not in stderr


def _has_ipv6_loopback() -> bool:
    try:
        _free_port(socket.AF_INET6, "::1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_the_banner_brackets_an_ipv6_host() -> None:
    port = _free_port(socket.AF_INET6, "::1")
    stderr = _banner_of_a_running_proxy(
        ["--upstream", "openai", "--host", "::1", "--port", str(port), "--no-log"],
        f"http://[::1]:{port}",
    )
    assert (
        stderr.splitlines()[0]
        == f"promptcache proxy on http://[::1]:{port} -> https://api.openai.com"
    )


def test_http_url_brackets_ipv6_literals_once() -> None:
    assert http_url("127.0.0.1", 8787) == "http://127.0.0.1:8787"
    assert http_url("localhost", 1) == "http://localhost:1"
    assert http_url("::1", 8787) == "http://[::1]:8787"
    assert http_url("[fe80::1]", 80) == "http://[fe80::1]:80"


def test_vendor_diagnostics_without_an_anthropic_route_says_nothing_is_asked() -> None:
    port = _free_port()
    stderr = _banner_of_a_running_proxy(
        ["--upstream", "http://127.0.0.1:8000", "--port", str(port), "--no-log",
         "--vendor-diagnostics"],
        f"http://127.0.0.1:{port}",
    )  # fmt: skip
    assert stderr.splitlines()[0] == (
        f"promptcache proxy on http://127.0.0.1:{port} -> http://127.0.0.1:8000, not asking for "
        "cache diagnostics (no route leads to Anthropic)"
    )


def test_a_config_files_routes_are_in_the_banner(tmp_path: Path) -> None:
    # the default upstream alone said "-> https://api.anthropic.com" for a file that sends
    # local/* models to an engine and chat to OpenAI
    config = tmp_path / "upstreams.toml"
    config.write_text(
        'default_upstream = "anthropic"\n'
        '[upstreams.local]\nurl = "http://127.0.0.1:8000"\nvendor = "engine"\n'
        '[[routes]]\nmodel_prefix = "local/"\nupstream = "local"\n'
        '[[routes]]\npath_prefix = "/v1/chat/"\nmodel_prefix = "gpt-"\nupstream = "openai"\n'
    )
    port, stderr = _banner_with_config(config)
    assert stderr.splitlines()[0] == (
        f"promptcache proxy on http://127.0.0.1:{port} -> default upstream: "
        "https://api.anthropic.com; "
        "model local/* -> http://127.0.0.1:8000; path /v1/chat/* and model gpt-* -> "
        "https://api.openai.com"
    )


def test_a_route_to_a_fleet_names_its_replicas_not_its_first_one(tmp_path: Path) -> None:
    # "model m* -> http://127.0.0.1:8001" read as if that one replica took the route's traffic
    config = tmp_path / "fleet.toml"
    config.write_text(
        'default_upstream = "openai"\n'
        '[upstreams.fleet]\nreplicas = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]\n'
        'policy = "least_loaded"\n'
        '[[routes]]\nmodel_prefix = "m"\nupstream = "fleet"\n'
    )
    port, stderr = _banner_with_config(config)
    assert stderr.splitlines()[0] == (
        f"promptcache proxy on http://127.0.0.1:{port} -> default upstream: "
        "https://api.openai.com; "
        "model m* -> 2 replicas (http://127.0.0.1:8001, http://127.0.0.1:8002), policy "
        "least_loaded"
    )


def test_a_default_fleet_with_routes_is_named_the_default_upstream(tmp_path: Path) -> None:
    # "..., policy least_loaded (default); ..." read as if least_loaded were the default policy
    config = tmp_path / "fleet.toml"
    config.write_text(
        'default_upstream = "fleet"\n'
        '[upstreams.fleet]\nreplicas = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]\n'
        'policy = "least_loaded"\n'
        '[[routes]]\nmodel_prefix = "gpt-"\nupstream = "openai"\n'
    )
    port, stderr = _banner_with_config(config)
    assert stderr.splitlines()[0] == (
        f"promptcache proxy on http://127.0.0.1:{port} -> default upstream: 2 replicas "
        "(http://127.0.0.1:8001, http://127.0.0.1:8002), policy least_loaded; model gpt-* -> "
        "https://api.openai.com"
    )
    assert "(default)" not in stderr


def test_a_one_replica_fleet_is_one_replica(tmp_path: Path) -> None:
    # "-> 1 replicas (http://127.0.0.1:8001), policy prefix"
    config = tmp_path / "fleet.toml"
    config.write_text(
        'default_upstream = "fleet"\n[upstreams.fleet]\nreplicas = ["http://127.0.0.1:8001"]\n'
    )
    port, stderr = _banner_with_config(config)
    assert stderr.splitlines()[0] == (
        f"promptcache proxy on http://127.0.0.1:{port} -> 1 replica (http://127.0.0.1:8001), "
        "policy prefix"
    )
