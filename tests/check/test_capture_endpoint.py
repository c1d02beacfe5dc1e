"""The capture endpoint on its own: every vendor route answered in its wire format, recorded
with the hook's headers; Gemini through raw HTTP (no Gemini client is installed here)."""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from promptcache.check.canned import REPLY_TEXT
from promptcache.check.capture import CallSite, CaptureServer
from promptcache.proxy.sse import SSEDecoder


@pytest.fixture
def server() -> CaptureServer:
    with CaptureServer() as running:
        yield running  # type: ignore[misc]


def _events(body: bytes) -> list[dict[str, object]]:
    decoder = SSEDecoder()
    events = decoder.feed(body)
    assert decoder.close() == ([], b"")
    return [json.loads(e.data) for e in events if e.data != "[DONE]"]


def test_gemini_generate_and_stream(server: CaptureServer) -> None:
    base = server.base_urls()["GOOGLE_GEMINI_BASE_URL"]
    body = {"systemInstruction": {"parts": [{"text": "Be brief."}]}, "contents": [
        {"role": "user", "parts": [{"text": "hi"}]}
    ]}  # fmt: skip
    url = f"{base}/v1beta/models/gemini-2.5-flash"
    plain = httpx.post(f"{url}:generateContent", json=body)
    assert plain.json()["candidates"][0]["content"]["parts"][0]["text"] == REPLY_TEXT
    sse = httpx.post(f"{url}:streamGenerateContent?alt=sse", json=body)
    assert sse.headers["content-type"].startswith("text/event-stream")
    [event] = _events(sse.content)
    assert event["candidates"][0]["content"]["parts"][0]["text"] == REPLY_TEXT  # type: ignore[index]
    array = httpx.post(f"{url}:streamGenerateContent", json=body).json()
    assert isinstance(array, list) and len(array) == 1
    counted = httpx.post(f"{url}:countTokens", json=body).json()
    assert set(counted) == {"totalTokens"}
    recorded = server.requests()
    assert [r.api for r in recorded] == ["gemini", "gemini", "gemini", None]
    assert recorded[0].path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert recorded[1].query == "alt=sse"
    assert json.loads(recorded[0].body) == body


def test_hook_headers_are_recorded_and_unknown_routes_get_vendor_errors(
    server: CaptureServer,
) -> None:
    base = server.base_urls()["OPENAI_BASE_URL"]
    headers = {
        "x-promptcache-check-run": "3",
        "x-promptcache-check-site": "/app/main.py%0912%09Bot.ask",
        "x-promptcache-check-pid": "40007",
        "x-promptcache-check-listings": "2",
    }
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{base}/chat/completions", json=body, headers=headers).status_code == 200
    missing = httpx.post(f"{base}/files", json={"purpose": "batch"})
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "invalid_request_error"
    # a smoke script that uploads a file fails here: the error says what check serves and
    # what to do, not only what it does not serve
    assert missing.json()["error"]["message"].endswith(
        "with canned replies; run check with --forward to send every request to the real API, "
        "or leave this call out of the checked command"
    )
    anthropic_missing = httpx.post(server.base_urls()["ANTHROPIC_BASE_URL"] + "/v1/batches")
    assert anthropic_missing.json()["type"] == "error"
    first, second, third = server.requests()
    assert (first.run, first.pid, first.listings, first.hooked) == (3, 40007, 2, True)
    assert first.site == CallSite("/app/main.py", 12, "Bot.ask")
    assert (second.run, second.hooked, second.site, second.api) == (0, False, None, None)
    assert third.status == 404


def test_stream_usage_chunk_only_when_asked(server: CaptureServer) -> None:
    base = server.base_urls()["OPENAI_BASE_URL"]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    plain = _events(httpx.post(f"{base}/chat/completions", json=body).content)
    assert all("usage" not in e for e in plain)
    body["stream_options"] = {"include_usage": True}
    with_usage = _events(httpx.post(f"{base}/chat/completions", json=body).content)
    assert with_usage[-1]["choices"] == [] and with_usage[-1]["usage"]
    assert (
        "".join(
            e["choices"][0]["delta"].get("content", "")
            for e in with_usage
            if e["choices"]  # type: ignore[index,union-attr]
        )
        == REPLY_TEXT
    )


def test_dozens_of_connections_opened_at_once_are_all_queued() -> None:
    # a pool of 64 workers connects all at once; with socketserver's backlog of 5 the kernel
    # dropped the connections past the sixth while the endpoint was busy accepting, and
    # the program saw connection resets. Here the endpoint accepts nothing until all 64 have
    # connected, then answers each of them.
    endpoint = CaptureServer()
    host, port = endpoint.origin.removeprefix("http://").rsplit(":", 1)
    body = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'
    request = (
        b"POST /openai/v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: "
        b"application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
    ) % (len(body), body)
    sockets = []
    try:
        for _ in range(64):
            sock = socket.socket()
            sockets.append(sock)
            sock.settimeout(0.5)
            sock.connect((host, int(port)))  # past the backlog: TimeoutError
        with endpoint:
            for sock in sockets:
                sock.settimeout(30)
                sock.sendall(request)
                assert sock.recv(64).startswith(b"HTTP/1.1 200 "), "no answer"
        assert len(endpoint.requests()) == 64
    finally:
        for sock in sockets:
            sock.close()
        endpoint.close()


def test_a_request_that_forces_a_tool_call_gets_the_canned_text(server: CaptureServer) -> None:
    # docs/check.md, what it cannot see: the canned reply never calls a tool, even where the
    # request requires one, so an agent loop ends (or fails) after its first turn
    tool = {"type": "function", "function": {"name": "list_tables", "parameters": {}}}
    openai = httpx.post(
        server.base_urls()["OPENAI_BASE_URL"] + "/chat/completions",
        json={"model": "o3-mini", "messages": [{"role": "user", "content": "hi"}],
              "tools": [tool], "tool_choice": "required"},
    ).json()  # fmt: skip
    assert openai["choices"][0]["message"]["content"] == REPLY_TEXT
    assert "tool_calls" not in openai["choices"][0]["message"]
    anthropic = httpx.post(
        server.base_urls()["ANTHROPIC_BASE_URL"] + "/v1/messages",
        json={"model": "claude-sonnet-4-5", "max_tokens": 9, "tool_choice": {"type": "any"},
              "tools": [{"name": "t", "input_schema": {"type": "object"}}],
              "messages": [{"role": "user", "content": "hi"}]},
    ).json()  # fmt: skip
    assert anthropic["content"] == [{"type": "text", "text": REPLY_TEXT}]
    docs = (Path(__file__).parents[2] / "docs" / "check.md").read_text(encoding="utf-8")
    assert f"Every canned reply is the one text, `{REPLY_TEXT}`" in " ".join(docs.split())


def _handler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "process_request_thread" in t.name]


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the endpoint's handler thread never got there"
        time.sleep(0.01)


def test_a_connection_the_program_resets_prints_no_traceback(
    server: CaptureServer, capfd: pytest.CaptureFixture[str]
) -> None:
    # a program killed at --timeout (or by Ctrl-C) mid-request resets its connection; the
    # endpoint's thread then fails reading it; socketserver's default would print that
    # traceback ('Exception occurred during processing of request ... ConnectionResetError')
    # into the program's output above check's own 'ran past --timeout' line: none is printed
    host, port = server.origin.removeprefix("http://").rsplit(":", 1)
    before = set(_handler_threads())
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /openai/v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
    _wait_for(lambda: bool(set(_handler_threads()) - before))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # SO_LINGER 0: an RST, as the kernel sends for a killed process's socket
    _wait_for(lambda: not set(_handler_threads()) - before)
    assert capfd.readouterr() == ("", "")
    answer = httpx.post(
        server.base_urls()["OPENAI_BASE_URL"] + "/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert answer.status_code == 200  # the endpoint serves on


_NAMED_ROUTE = re.compile(r"\b(GET|POST) (/[^\s,;]+)")


@pytest.mark.parametrize(
    ("base_variable", "unknown", "must_name"),
    [
        ("ANTHROPIC_BASE_URL", "/v1/batches", "POST /v1/messages/count_tokens"),
        ("OPENAI_BASE_URL", "/files", "POST /v1/embeddings"),
        ("GOOGLE_GEMINI_BASE_URL", "/v1beta/models/m:predict", ":batchEmbedContents"),
    ],
)
def test_the_404_of_an_unknown_route_names_every_route_the_mount_answers(
    server: CaptureServer, base_variable: str, unknown: str, must_name: str
) -> None:
    # the message is what a user reads to learn what check serves: each route it names is
    # answered, and a route that is answered (count_tokens, countTokens) is named
    base = server.base_urls()[base_variable]
    missing = httpx.post(base + unknown, json={"input": "x"})
    assert missing.status_code == 404
    message = missing.json()["error"]["message"]
    named = _NAMED_ROUTE.findall(message.split(": ", 1)[1])
    assert named and must_name in message
    origin = base.removesuffix("/v1") if base_variable == "OPENAI_BASE_URL" else base
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "contents": []}
    for method, path in named:
        answered = httpx.request(
            method, origin + path.replace("{model}", "m"), json=body if method == "POST" else None
        )
        assert answered.status_code == 200, (method, path)


def test_embeddings_are_answered_with_the_same_unit_vectors_in_every_run(
    server: CaptureServer,
) -> None:
    # a smoke script that embeds its documents before it chats (a RAG app) failed in run 0 on
    # the endpoint's 404; now each input gets a vector from a hash of its text, so the same
    # documents are retrieved in every run
    import openai

    client = openai.OpenAI(base_url=server.base_urls()["OPENAI_BASE_URL"], api_key="k")
    texts = ["the first document", "the second document", "the first document"]
    packed = client.embeddings.create(model="text-embedding-3-small", input=texts)  # base64
    plain = client.embeddings.create(
        model="text-embedding-3-small", input=texts, encoding_format="float"
    )
    vectors = [d.embedding for d in plain.data]
    assert [d.index for d in plain.data] == [0, 1, 2]
    assert [len(v) for v in vectors] == [1536] * 3
    assert all(abs(sum(x * x for x in v) - 1) < 1e-4 for v in vectors)
    assert vectors[0] == vectors[2] != vectors[1]  # the same text, the same vector
    assert all(
        max(abs(a - b) for a, b in zip(p.embedding, v, strict=True)) < 1e-6
        for p, v in zip(packed.data, vectors, strict=True)
    )  # float32 in base64, the same numbers
    large = client.embeddings.create(model="text-embedding-3-large", input="q").data[0]
    short = client.embeddings.create(model="text-embedding-3-large", input="q", dimensions=256)
    assert (len(large.embedding), len(short.data[0].embedding)) == (3072, 256)
    tokens = client.embeddings.create(model="text-embedding-3-small", input=[[1, 2], [3]])
    assert len(tokens.data) == 2  # token-id inputs, one vector each
    # another check (another run) answers the same text with the same vector
    with CaptureServer() as other:
        again = openai.OpenAI(base_url=other.base_urls()["OPENAI_BASE_URL"], api_key="k")
        repeat = again.embeddings.create(
            model="text-embedding-3-small", input=texts[0], encoding_format="float"
        )
    assert repeat.data[0].embedding == vectors[0]
    # Gemini: one content, and a batch, at the model's size or the asked one
    url = server.base_urls()["GOOGLE_GEMINI_BASE_URL"] + "/v1beta/models/gemini-embedding-001"
    content = {"parts": [{"text": "the first document"}]}
    one = httpx.post(f"{url}:embedContent", json={"content": content}).json()
    batch = httpx.post(
        f"{url}:batchEmbedContents",
        json={"requests": [{"content": content}, {"content": content, "outputDimensionality": 8}]},
    ).json()
    assert len(one["embedding"]["values"]) == 3072
    assert [len(e["values"]) for e in batch["embeddings"]] == [3072, 8]
    assert batch["embeddings"][0] == one["embedding"]
    # none of them is an LLM request: nothing of theirs is compared
    assert {r.api for r in server.requests()} == {None}
