"""``--api-key``: the /v1 routes need the key, probes do not; non-loopback binds need a key;
the Bearer scheme is case-insensitive and a blank key or token never authenticates."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from click.testing import CliRunner
from server_support import TINYSTORIES, LiveServer, load_engine

from promptcache.cli import cli
from promptcache.engine.server import create_app
from promptcache.engine.server.auth import bearer_token, check_bind, validate_api_key
from promptcache.errors import ConfigError

KEY = "s3cret"


@pytest.fixture(scope="module")
def keyed_url() -> Iterator[str]:
    app = create_app(load_engine(num_blocks=32), served_model_names=["tiny"], api_key=KEY)
    with LiveServer(app) as live:
        yield live.url


def test_v1_routes_need_the_key_probes_do_not(keyed_url: str) -> None:
    good = openai.OpenAI(base_url=f"{keyed_url}/v1", api_key=KEY, max_retries=0)
    reply = good.completions.create(model="tiny", prompt="Hi", max_tokens=2)
    assert reply.usage is not None and reply.usage.completion_tokens == 2
    bad = openai.OpenAI(base_url=f"{keyed_url}/v1", api_key="guess", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        bad.completions.create(model="tiny", prompt="Hi", max_tokens=2)
    assert info.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    assert httpx.get(f"{keyed_url}/health").status_code == 200
    assert httpx.get(f"{keyed_url}/metrics").status_code == 200


def test_a_request_with_no_key_gets_openais_missing_key_error(keyed_url: str) -> None:
    client = openai.OpenAI(base_url=f"{keyed_url}/v1", api_key=KEY, max_retries=0)
    no_header = {"Authorization": openai.Omit()}  # the client sends no Authorization header
    with pytest.raises(openai.AuthenticationError) as info:
        client.completions.create(model="tiny", prompt="Hi", max_tokens=2, extra_headers=no_header)
    assert info.value.status_code == 401
    assert info.value.body == {
        "message": "You didn't provide an API key. You need to provide the server's --api-key in "
        "an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY; the "
        "client's api_key).",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    assert info.value.request.headers.get("authorization") is None
    response = httpx.get(f"{keyed_url}/v1/models")
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {"error": info.value.body}
    # a key that is sent but wrong keeps the incorrect-key error
    wrong = openai.OpenAI(base_url=f"{keyed_url}/v1", api_key="guess", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        wrong.models.list()
    assert info.value.body == {
        "message": "Incorrect API key provided: send the server's --api-key as "
        "'Authorization: Bearer <key>' (the client's api_key).",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (f"Bearer {KEY}", 200),
        (f"bearer {KEY}", 200),  # RFC 7235: the scheme is case-insensitive
        (f"BEARER {KEY}", 200),
        (f"Bearer   {KEY}", 200),  # 1*SP between scheme and token
        (f"Bearer\t{KEY}", 200),
        ("Bearer", 401),
        ("", 401),
        (KEY, 401),
        (f"Basic {KEY}", 401),
        (f"Bearer {KEY}x", 401),
        (f"Bearer {KEY.upper()}", 401),  # the key itself is case-sensitive
        (f"Bearer {KEY} extra", 401),
    ],
)
def test_the_bearer_header_is_parsed_as_rfc_7235_says(
    keyed_url: str, authorization: str, status: int
) -> None:
    response = httpx.get(f"{keyed_url}/v1/models", headers={"authorization": authorization})
    assert response.status_code == status, response.text
    if status == 401:
        assert response.json()["error"]["code"] == "invalid_api_key"
        assert response.headers["www-authenticate"] == "Bearer"


def _raw_status(url: str, header: bytes) -> tuple[int, bytes]:
    """Status and raw response of ``GET /v1/models`` sent byte for byte (httpx refuses to send a
    header value with trailing whitespace, which is exactly what this needs to send)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + header + b"\r\nConnection: close\r\n\r\n"
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    return int(raw.split(b" ", 2)[1]), raw


@pytest.mark.parametrize(
    "header",
    [b"Authorization: Bearer ", b"Authorization: Bearer    ", b"Authorization: Bearer \t",
     b"Authorization:", b"Authorization: bearer"],
)  # fmt: skip
def test_an_empty_bearer_token_never_authenticates(keyed_url: str, header: bytes) -> None:
    status, raw = _raw_status(keyed_url, header)
    assert status == 401, raw
    assert b"invalid_api_key" in raw
    assert _raw_status(keyed_url, b"Authorization: bEARER  " + KEY.encode() + b"  ")[0] == 200


def test_bearer_token_parsing() -> None:
    assert bearer_token(b"bEaReR  abc ") == b"abc"
    assert bearer_token(b"Bearer") is None
    assert bearer_token(b"Bearer \t ") is None
    assert bearer_token(b"Token abc") is None


@pytest.mark.parametrize(
    "key", ["", " ", "   ", "\t", "\n", " s3cr3tZ", "s3cr3tZ ", "s3cr\n3tZ", "s3cré3tZ"]
)
def test_an_api_key_no_client_could_send_is_refused(key: str) -> None:
    with pytest.raises(ConfigError, match="--api-key") as info:
        validate_api_key(key)
    assert "s3cr" not in str(info.value)  # the key is never echoed
    with pytest.raises(ConfigError, match="--api-key"):
        check_bind("127.0.0.1", key, False)


def test_create_app_and_serve_refuse_a_blank_api_key() -> None:
    assert validate_api_key("sk-abc 123") == "sk-abc 123"
    with pytest.raises(ConfigError, match="whitespace"):
        create_app(load_engine(num_blocks=8), served_model_names=["tiny"], api_key="  ")
    result = CliRunner().invoke(
        cli, ["engine", "serve", "--model", str(TINYSTORIES), "--api-key", " "]
    )
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "--api-key" in result.output


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_needs_no_key(host: str) -> None:
    check_bind(host, None, False)


def test_other_hosts_need_a_key_or_an_explicit_opt_out() -> None:
    with pytest.raises(ConfigError, match="--api-key"):
        check_bind("0.0.0.0", None, False)
    check_bind("0.0.0.0", "key", False)
    check_bind("0.0.0.0", None, True)
    result = CliRunner().invoke(
        cli, ["engine", "serve", "--model", str(TINYSTORIES), "--host", "0.0.0.0"]
    )
    assert result.exit_code == 2
    assert "error:" in result.output and "--api-key" in result.output
