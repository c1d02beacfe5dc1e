"""An upstream whose TLS handshake fails says what to change, not only the SSL library's words.

Real servers on 127.0.0.1: the mock vendor (plain HTTP) given to the proxy as ``https://``, and
the mock vendor under uvicorn with a self-signed certificate made by the ``openssl`` program.
Both were answered 502 'refused the connection or could not be reached: [SSL:
WRONG_VERSION_NUMBER] ...' / '[SSL: CERTIFICATE_VERIFY_FAILED] ...', though the server took the
connection; the message now names the handshake and the fix, and the fix it names works.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from proxy_support import mock_config
from servers import ServerThread
from upstreams import MockUpstream

from promptcache.proxy.app import build_app
from promptcache.proxy.config import ProxyConfig, UpstreamConfig
from promptcache.proxy.routing import RoutingSettings

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def ask(proxy: ServerThread) -> httpx.Response:
    return httpx.post(proxy.url + "/v1/chat/completions", json=CHAT, timeout=30)


def test_https_to_a_plain_http_server_says_to_use_http(mock_server: ServerThread) -> None:
    https = mock_server.url.replace("http://", "https://")
    with ServerThread(build_app(mock_config(https, None))) as proxy:
        answer = ask(proxy)
    assert answer.status_code == 502
    message = answer.json()["error"]["message"]
    assert "refused the connection" not in message, message
    assert (
        f"upstream openai ({https}) did not answer the TLS handshake as a TLS server would (it "
        "seems to speak plain HTTP: give its URL with http:// instead of https://)"
    ) in message, message


def test_a_fleet_replica_given_as_https_says_so_in_its_row_and_health_check(
    mock_server: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    https = mock_server.url.replace("http://", "https://")
    second = https.replace("127.0.0.1", "localhost")
    upstream = UpstreamConfig(
        name="fleet", url=https, vendor="openai_compatible", replicas=(https, second),
        routing=RoutingSettings(health_interval_s=60.0),
    )  # fmt: skip
    config = ProxyConfig(upstreams={"fleet": upstream}, default_upstream="fleet", db_path=None)
    with caplog.at_level("WARNING"), ServerThread(build_app(config)) as proxy:
        answer = ask(proxy)
    assert answer.status_code == 502
    message = answer.json()["error"]["message"]
    assert message.count("seems to speak plain HTTP: give its URL with http://") == 2, message
    downs = [r.getMessage() for r in caplog.records if "out of rotation" in r.getMessage()]
    assert downs and all("seems to speak plain HTTP" in line for line in downs), downs


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl program to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_an_untrusted_certificate_says_how_to_trust_it_and_that_works(
    self_signed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed
    vendor = ServerThread(MockUpstream(), ssl_certfile=str(cert), ssl_keyfile=str(key))
    with vendor:
        https = vendor.url.replace("http://", "https://")
        with ServerThread(build_app(mock_config(https, None))) as proxy:
            refused = ask(proxy)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # what the message says to do
        with ServerThread(build_app(mock_config(https, None))) as proxy:
            trusted = ask(proxy)
    assert refused.status_code == 502
    message = refused.json()["error"]["message"]
    assert (
        f"upstream openai ({https}) presented a TLS certificate the proxy does not trust (for a "
        "private CA, start the proxy with SSL_CERT_FILE set to its CA bundle)"
    ) in message, message
    assert trusted.status_code == 200, trusted.text
