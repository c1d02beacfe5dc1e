"""The proxy is invisible on the wire: exact bytes both ways, headers through, keys never stored."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from proxy_support import RunningProxy, read_rows
from servers import ServerThread
from starlette.types import Receive, Scope, Send
from upstreams import MockUpstream, recorded, split_events, without_usage

from promptcache.proxy.config import RouteRule, UpstreamConfig
from promptcache.proxy.handler import DECODE_BATCH_BYTES

ANTHROPIC_KEY = "sk-ant-api03-forwarding-test-0123456789"
OPENAI_KEY = "sk-proj-forwarding-test-0123456789abcd"
GOOGLE_KEY = "AIzaSyForwardingTest-0123456789abcdefgh"

# Odd whitespace, non-sorted keys, escapes and non-ASCII, a 1h TTL: all must arrive untouched.
ANTHROPIC_BODY = (
    b'{ "model":"claude-haiku-4-5",  "max_tokens" : 64,\n'
    b'  "system": [{"type": "text", "text": "Caf\\u00e9 rules \xe2\x98\x95",'
    b' "cache_control": {"ttl": "1h", "type": "ephemeral"}}],\n'
    b'  "messages": [{"role":"user","content":"hi"}], "stream": false }'
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_request_body_and_response_bytes_are_forwarded_exactly(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    proxy = start_proxy()
    reply = httpx.post(
        proxy.url + "/v1/messages",
        content=ANTHROPIC_BODY,
        headers={"x-api-key": ANTHROPIC_KEY, "content-type": "application/json"},
    )
    assert reply.status_code == 200
    assert sha(mock_upstream.requests[0].body) == sha(ANTHROPIC_BODY)
    assert reply.content == recorded("anthropic", "cache_read_and_write_5m", "json")
    streamed = ANTHROPIC_BODY.replace(b'"stream": false', b'"stream": true')
    with httpx.stream(
        "POST",
        proxy.url + "/v1/messages",
        content=streamed,
        headers={"x-api-key": ANTHROPIC_KEY, "x-mock-chunk": "7"},  # split mid-line, mid-CRLF
    ) as response:
        body = b"".join(response.iter_raw())
    assert sha(mock_upstream.requests[1].body) == sha(streamed)
    assert body == recorded("anthropic", "cache_read_and_write_5m", "sse")
    rows = proxy.rows(2)
    assert rows[0]["id"] == reply.headers["x-promptcache-request-id"]
    assert rows[1]["id"] == response.headers["x-promptcache-request-id"]
    assert [r["cache_write_5m_tokens"] for r in rows] == [2048, 2048]


def test_headers_pass_through_except_hop_by_hop_and_the_proxys_own(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    proxy = start_proxy(auth_token="proxy-secret-token")
    with anthropic.Anthropic(
        base_url=proxy.url,
        api_key=ANTHROPIC_KEY,
        max_retries=0,
        default_headers={
            "x-promptcache-auth": "proxy-secret-token",
            "anthropic-beta": "extended-cache-ttl-2025-04-11",
            "keep-alive": "timeout=5",
            "proxy-authorization": "Basic c2VjcmV0",
        },
    ) as client:
        client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=16,
            messages=[{"role": "user", "content": "hi"}],
        )
    seen = mock_upstream.requests[0]
    # the vendor credential goes through (this client version sends it as a bearer token)
    assert ANTHROPIC_KEY in (seen.header("x-api-key") or seen.header("authorization") or "")
    assert seen.header("anthropic-version")
    assert seen.header("anthropic-beta") == "extended-cache-ttl-2025-04-11"
    assert seen.header("accept-encoding") == "identity"
    assert seen.header("host") == mock_upstream_host(proxy)
    names = seen.header_names()
    assert not names & {"x-promptcache-auth", "keep-alive", "proxy-authorization"}
    assert proxy.row()["status"] == 200


def test_headers_named_in_connection_are_not_forwarded_upstream(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    proxy = start_proxy()
    reply = httpx.post(
        proxy.url + "/v1/chat/completions",
        json={"model": "gpt-4o", "messages": []},
        headers={
            "authorization": f"Bearer {OPENAI_KEY}",
            "connection": "keep-alive, X-Hop-Session, x-hop-debug",
            "x-hop-session": "client-to-proxy-only",
            "x-hop-debug": "1",
            "x-end-to-end": "kept",
        },
    )
    assert reply.status_code == 200
    seen = mock_upstream.requests[0]
    assert not seen.header_names() & {"x-hop-session", "x-hop-debug"}
    assert seen.header("x-end-to-end") == "kept"


async def _answer_with_connection_options(scope: Scope, receive: Receive, send: Send) -> None:
    """An upstream whose response names two of its headers in ``Connection``."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    body = json.dumps({"object": "list", "data": []}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"x-upstream-hop"),
        (b"connection", b"X-Upstream-Trace"),
        (b"x-upstream-hop", b"upstream-to-proxy-only"),
        (b"x-upstream-trace", b"abc"),
        (b"x-end-to-end", b"kept"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def test_headers_named_in_the_upstreams_connection_do_not_reach_the_client(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    with ServerThread(_answer_with_connection_options) as upstream:
        proxy = start_proxy(
            upstreams={"openai": UpstreamConfig(name="openai", url=upstream.url, vendor="openai")}
        )
        reply = httpx.get(proxy.url + "/v1/models")
    assert reply.status_code == 200
    assert "x-upstream-hop" not in reply.headers and "x-upstream-trace" not in reply.headers
    assert reply.headers["x-end-to-end"] == "kept"


def mock_upstream_host(proxy: RunningProxy) -> str:
    url = proxy.app.state.config.upstreams["anthropic"].url
    return str(httpx.URL(url).netloc.decode())


def test_upstream_response_headers_reach_the_client(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    reply = httpx.get(proxy.url + "/v1/models", headers={"authorization": f"Bearer {OPENAI_KEY}"})
    assert reply.status_code == 200
    assert reply.headers["x-upstream"] == "mock"
    assert reply.json()["data"][0]["id"] == "gpt-4o"
    row = proxy.row()
    assert (row["route"], row["api"], row["model"], row["uncached_input_tokens"]) == (
        "/v1/models",
        None,
        None,
        None,
    )


def test_count_tokens_is_forwarded_and_logged_without_usage(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    with anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0) as client:
        counted = client.messages.count_tokens(
            model="claude-haiku-4-5", messages=[{"role": "user", "content": "hi"}]
        )
    assert counted.input_tokens == 2095
    row = proxy.row()
    assert row["route"] == "/v1/messages/count_tokens"
    assert row["output_tokens"] is None and row["prefix_hash"]


def test_api_keys_never_reach_the_log_file(
    start_proxy: Callable[..., RunningProxy], tmp_path: Path
) -> None:
    proxy = start_proxy(store_bodies=True)
    with anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0) as client:
        client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=16,
            messages=[{"role": "user", "content": f"debug: my key is {OPENAI_KEY}"}],
        )
    with openai.OpenAI(base_url=proxy.url + "/v1", api_key=OPENAI_KEY, max_retries=0) as client:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    gemini = httpx.post(
        f"{proxy.url}/v1beta/models/gemini-2.5-flash:generateContent?key={GOOGLE_KEY}",
        json={"contents": [{"parts": [{"text": "hi"}]}]},
    )
    assert gemini.status_code == 200
    rows = proxy.rows(3)
    proxy.server.stop()  # drain and checkpoint, then read every byte on disk
    assert all(r["key_fingerprint"] for r in rows)
    assert len({r["key_fingerprint"] for r in rows}) == 3
    assert "[REDACTED]" in rows[0]["request_body"]
    assert rows[0]["response_body"].startswith("{")
    blob = b"".join(p.read_bytes() for p in tmp_path.glob(proxy.db_path.name + "*"))
    for key in (ANTHROPIC_KEY, OPENAI_KEY, GOOGLE_KEY):
        assert key.encode() not in blob


def test_bodies_are_not_stored_by_default(start_proxy: Callable[..., RunningProxy]) -> None:
    proxy = start_proxy()
    httpx.post(proxy.url + "/v1/messages", content=ANTHROPIC_BODY)
    row = proxy.row()
    assert row["request_body"] is None and row["response_body"] is None


@pytest.mark.parametrize(
    ("path", "api", "sent", "cache_read"),
    [
        (
            "/v1/chat/completions",
            "openai_chat",
            b'{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "x"}]}',
            1920,
        ),
        (
            "/v1/completions",
            "openai_completions",
            b'{"model": "gpt-3.5-turbo-instruct", "stream": true, "prompt": "Once"}',
            1024,
        ),
    ],
)
def test_openai_stream_gets_usage_injected_and_the_extra_chunk_stripped(
    start_proxy: Callable[..., RunningProxy],
    mock_upstream: MockUpstream,
    path: str,
    api: str,
    sent: bytes,
    cache_read: int,
) -> None:
    proxy = start_proxy()
    with httpx.stream("POST", proxy.url + path, content=sent) as response:
        received = b"".join(response.iter_raw())
    upstream_saw = mock_upstream.requests[0].body
    assert upstream_saw == b'{"stream_options":{"include_usage":true},' + sent[1:]
    full = recorded(api, "cached", "sse")
    usage_chunk = next(e for e in full.split(b"\n\n") if b'"choices":[]' in e) + b"\n\n"
    assert received == full.replace(usage_chunk, b"")
    assert "content-length" not in response.headers
    assert proxy.row()["cache_read_tokens"] == cache_read


def test_a_long_stream_is_relayed_whole_and_its_usage_read(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # 300 events: the relay reads queued events in batches while the stream goes on.
    proxy = start_proxy()
    sent = b'{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "x"}]}'
    url = proxy.url + "/v1/chat/completions"
    with httpx.stream("POST", url, content=sent, headers={"x-mock-repeat": "300"}) as response:
        received = b"".join(response.iter_raw())
    # what the upstream sent (usage was injected), less its usage chunk
    full = split_events(recorded("openai_chat", "cached", "sse"))
    events = [e for e in full if b'"choices":[]' not in e]
    assert received == b"".join([events[0], *[events[1]] * 300, *events[1:]])
    row = proxy.row()
    assert (row["cache_read_tokens"], row["error"]) == (1920, None)


@pytest.mark.parametrize("chunk", ["", "7"])
def test_a_long_stream_relayed_unchanged_is_read_in_batches(
    start_proxy: Callable[..., RunningProxy], chunk: str
) -> None:
    # The client asked for usage itself, so the proxy relays the bytes as they come and decodes
    # them in batches of DECODE_BATCH_BYTES: 1,000 events (about 150 KiB) cross that boundary
    # several times, and in 7-byte pieces a boundary falls inside an event.
    proxy = start_proxy()
    sent = (
        b'{"model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true}, '
        b'"messages": [{"role": "user", "content": "x"}]}'
    )
    url = proxy.url + "/v1/chat/completions"
    headers = {"x-mock-repeat": "1000", "x-mock-chunk": chunk}
    with httpx.stream("POST", url, content=sent, headers=headers) as response:
        received = b"".join(response.iter_raw())
    full = split_events(recorded("openai_chat", "cached", "sse"))
    expected = b"".join([full[0], *[full[1]] * 1000, *full[1:]])
    assert len(expected) > 2 * DECODE_BATCH_BYTES
    assert received == expected
    row = proxy.row()
    assert (row["cache_read_tokens"], row["error"], row["stream"]) == (1920, None, 1)
    assert row["response_id"] is not None


def test_recording_off_is_pure_forwarding(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream, tmp_path: Path
) -> None:
    proxy = start_proxy(db_path=None)
    proxy.app.state.record_hooks.clear()  # no log file and no hooks: nothing to record for
    sent = b'{"model": "gpt-4o", "stream": true, "messages": []}'
    with httpx.stream("POST", proxy.url + "/v1/chat/completions", content=sent) as response:
        received = b"".join(response.iter_raw())
    assert mock_upstream.requests[0].body == sent  # nothing injected
    assert received == without_usage(recorded("openai_chat", "cached", "sse"))
    assert "x-promptcache-request-id" not in response.headers
    assert not list(tmp_path.glob("*.db"))


def test_model_prefix_rules_pick_the_upstream(
    start_proxy: Callable[..., RunningProxy], mock_server: ServerThread
) -> None:
    engine = UpstreamConfig(name="engine", url=mock_server.url, vendor="engine")
    proxy = start_proxy(
        upstreams={"engine": engine}, rules=(RouteRule("engine", model_prefix="local/"),)
    )
    body = {"model": "local/tinystories", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(proxy.url + "/v1/chat/completions", json=body).status_code == 200
    body["model"] = "gpt-4o"
    assert httpx.post(proxy.url + "/v1/chat/completions", json=body).status_code == 200
    rows = proxy.rows(2)
    assert [(r["upstream"], r["vendor"]) for r in rows] == [
        ("engine", "engine"),
        ("openai", "openai"),
    ]


def test_a_reader_holding_the_log_never_blocks_forwarding(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    httpx.post(proxy.url + "/v1/messages", content=ANTHROPIC_BODY)
    proxy.rows(1)
    reader = sqlite3.connect(proxy.db_path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM requests").fetchone()  # holds a read snapshot
        with httpx.Client(base_url=proxy.url) as client:
            for _ in range(20):
                assert client.post("/v1/messages", content=ANTHROPIC_BODY).status_code == 200
        assert len(proxy.rows(21)) == 21  # written while the reader still holds its snapshot
        assert reader.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 1
        reader.execute("COMMIT")
    finally:
        reader.close()
    assert len(read_rows(proxy.db_path)) == 21


def test_gemini_query_string_reaches_the_upstream(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    proxy = start_proxy()
    url = f"{proxy.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=k123"
    with httpx.stream("POST", url, json={"contents": []}) as response:
        received = b"".join(response.iter_raw())
    assert mock_upstream.requests[0].query == "alt=sse&key=k123"
    assert received == recorded("gemini", "implicit_cache_thinking", "sse")
    row = proxy.row()
    assert json.loads(row["usage_json"])["cachedContentTokenCount"] == 11264
    assert row["route"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


def test_an_unrelated_400_to_a_stream_keeps_usage_injection_for_later_requests(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    # A 400 about the client's own request (here: every body) must not switch include_usage
    # injection off for the upstream: the next streams are still logged with their usage.
    proxy = start_proxy()
    sent = b'{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "x"}]}'
    url = proxy.url + "/v1/chat/completions"
    bad = httpx.post(url, content=sent, headers={"x-mock-fault": "status-400"})
    assert bad.status_code == 400
    with httpx.stream("POST", url, content=sent) as response:
        response.read()
    assert response.status_code == 200
    bodies = [r.body for r in mock_upstream.requests]
    injected = b'{"stream_options":{"include_usage":true},' + sent[1:]
    # the 400: tried with the injected field, then with the client's bytes; then injected again
    assert bodies == [injected, sent, injected]
    first, second = proxy.rows(2)
    assert first["status"] == 400
    assert second["status"] == 200 and second["total_input_tokens"] is not None


def test_an_upstream_refusing_the_injected_stream_options_gets_the_original_request(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    proxy = start_proxy()
    sent = b'{"model": "local", "stream": true, "messages": [{"role": "user", "content": "x"}]}'
    headers = {"x-mock-fault": "no-stream-options"}
    for _ in range(2):
        with httpx.stream(
            "POST", proxy.url + "/v1/chat/completions", content=sent, headers=headers
        ) as response:
            received = b"".join(response.iter_raw())
        assert response.status_code == 200
        assert received == without_usage(recorded("openai_chat", "cached", "sse"))
    bodies = [r.body for r in mock_upstream.requests]
    # first request: injected, refused, resent as sent; second: not injected any more
    assert bodies == [b'{"stream_options":{"include_usage":true},' + sent[1:], sent, sent]
    rows = proxy.rows(2)
    outcome = [(r["status"], r["error"], r["cache_read_tokens"]) for r in rows]
    assert outcome == [(200, None, None)] * 2
