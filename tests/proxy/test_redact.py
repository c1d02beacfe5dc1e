"""Credentials: fingerprints instead of keys, and redaction of stored bodies."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import httpx
from proxy_support import RunningProxy

from promptcache.proxy.config import UpstreamConfig
from promptcache.proxy.redact import REDACTED, client_secrets, key_fingerprint, redact_text

ANTHROPIC_KEY = "sk-ant-api03-" + "A1b2C3d4" * 10
OPENAI_KEY = "sk-proj-" + "Zz9Yy8Xx" * 6
GOOGLE_KEY = "AIza" + "SyD-0123456789abcdefghijklmnopqrstu"


def test_secrets_come_from_every_vendor_key_header_and_the_query() -> None:
    headers = [
        (b"x-api-key", ANTHROPIC_KEY.encode()),
        (b"authorization", b"Bearer " + OPENAI_KEY.encode()),
        (b"x-goog-api-key", GOOGLE_KEY.encode()),
        (b"content-type", b"application/json"),
    ]
    assert client_secrets(headers, b"alt=sse&key=query-key-123") == [
        ANTHROPIC_KEY,
        OPENAI_KEY,
        GOOGLE_KEY,
        "query-key-123",
    ]
    assert client_secrets([(b"content-type", b"x")], b"alt=sse") == []


def test_fingerprint_is_salted_short_and_never_the_key() -> None:
    first = key_fingerprint([OPENAI_KEY], b"salt-a")
    assert first is not None and len(first) == 16
    assert first == key_fingerprint([OPENAI_KEY], b"salt-a")
    assert first != key_fingerprint([OPENAI_KEY], b"salt-b")
    assert first != key_fingerprint([ANTHROPIC_KEY], b"salt-a")
    assert OPENAI_KEY not in first
    assert key_fingerprint([], b"salt-a") is None


def test_redaction_removes_keys_tokens_and_credential_fields() -> None:
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": f"my key is {OPENAI_KEY}, use it"}],
            "metadata": {"api_key": "plain-secret-value", "note": "Bearer abcdefgh12345678"},
            "other": f"{ANTHROPIC_KEY} and {GOOGLE_KEY} and the-exact-secret-1",
        }
    )
    out = redact_text(body, ["the-exact-secret-1"])
    for secret in (OPENAI_KEY, ANTHROPIC_KEY, GOOGLE_KEY, "plain-secret-value", "abcdefgh12345678"):
        assert secret not in out
    assert "the-exact-secret-1" not in out
    assert json.loads(out)["metadata"]["api_key"] == REDACTED
    assert "my key is" in out and "use it" in out


def test_redaction_leaves_ordinary_text_alone() -> None:
    text = "task-scheduler-for-desk-booking runs on disk-sk-volumes; short sk-12"
    assert redact_text(text, ["short"]) == text


def test_credentials_in_the_upstream_url_reach_neither_the_client_nor_the_log(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: connections are refused
    down = UpstreamConfig(
        name="openai", url=f"http://user:s3cretpw@127.0.0.1:{port}", vendor="openai"
    )
    proxy = start_proxy(upstreams={"openai": down})
    reply = httpx.post(proxy.url + "/v1/chat/completions", json={"model": "gpt-4o"})
    assert reply.status_code == 502
    assert "s3cretpw" not in reply.text and f"http://***@127.0.0.1:{port}" in reply.text
    error = proxy.row()["error"]
    assert "s3cretpw" not in error and f"http://***@127.0.0.1:{port}" in error
