"""``--vendor-diagnostics``: the proxy names the previous response in Anthropic requests itself.

The mock vendor (``diagnostics_vendor.py``) keeps the exact bytes it received; each is checked
against the client's own bytes with ``"diagnostics":{"previous_message_id":ID},`` spliced in
after the opening brace, and nothing else changed. ID is the response id of the request the
break explainer compares with (the previous turn of the same conversation), or null on a
conversation's first turn; after a restart it comes from the log.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2  # the official clients' transport
from diagnostics_vendor import (  # noqa: F401 (fixtures)
    VendorServer,
    diagnostics_vendor_fixture,
    start_diagnosing_proxy_fixture,
)
from proxy_support import RunningProxy, read_rows, wait_until_serving

from promptcache.proxy.config import UpstreamConfig

KEY = "sk-ant-api03-diagnostics-inject-0123456789"
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
SYSTEM = "You are the support agent of Acme Anvils (Zürich). Answer briefly. " * 40


def body(*texts: str) -> dict[str, Any]:
    """A Messages body whose conversation alternates ``texts`` (user first)."""
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for i, t in enumerate(texts)
    ]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 16,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
    }


def odd_bytes(payload: dict[str, Any]) -> bytes:
    """``payload`` as JSON the way no SDK writes it: leading blank, spaces, non-ASCII as is."""
    return (
        b" \n"
        + json.dumps(payload, ensure_ascii=False, indent=1, separators=(" , ", " : ")).encode()
    )


def with_member(raw: bytes, previous: str | None) -> bytes:
    """What the upstream must receive for ``raw``: the member after the first ``{``."""
    at = raw.index(b"{") + 1
    return (
        raw[:at]
        + b'"diagnostics":{"previous_message_id":'
        + json.dumps(previous).encode()
        + b"},"
        + raw[at:]
    )


def post(proxy: RunningProxy, raw: bytes) -> dict[str, Any]:
    """POST ``raw`` to /v1/messages; returns the answer once its row is logged (the proxy
    remembers a response for the next request's previous_message_id just after the client
    got its last byte)."""
    done = len(read_rows(proxy.db_path))
    reply = httpx.post(proxy.url + "/v1/messages", content=raw, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    proxy.rows(done + 1)
    result: dict[str, Any] = reply.json()
    return result


def test_the_body_gains_only_the_member_naming_the_previous_turn(
    start_diagnosing_proxy: Callable[..., RunningProxy], diagnostics_vendor: VendorServer
) -> None:
    proxy = start_diagnosing_proxy(vendor_diagnostics=True)
    first_raw = odd_bytes(body("How heavy is the A-100 anvil?"))
    first = post(proxy, first_raw)
    second_raw = odd_bytes(body("How heavy is the A-100 anvil?", "ok", "And the A-200?"))
    second = post(proxy, second_raw)
    third_raw = odd_bytes(
        body("How heavy is the A-100 anvil?", "ok", "And the A-200?", "ok", "Ta.")
    )
    third = post(proxy, third_raw)
    received = diagnostics_vendor.vendor.bodies
    assert received == [
        with_member(first_raw, None),
        with_member(second_raw, first["id"]),
        with_member(third_raw, second["id"]),
    ]
    assert second["diagnostics"] is None and third["diagnostics"] is None  # nothing diverged
    rows = proxy.rows(3)
    assert [r["vendor_diagnostics_added"] for r in rows] == [1, 1, 1]
    assert [r["vendor_comparison_id"] for r in rows] == [None, first["id"], second["id"]]
    assert [r["response_id"] for r in rows] == [first["id"], second["id"], third["id"]]
    assert [r["vendor_miss_reason"] for r in rows] == [None, "no_divergence", "no_divergence"]
    assert [r["previous_request_id"] for r in rows] == [None, rows[0]["id"], rows[1]["id"]]


def test_the_official_client_and_two_conversations_side_by_side(
    start_diagnosing_proxy: Callable[..., RunningProxy], diagnostics_vendor: VendorServer
) -> None:
    """Each conversation names its own previous turn; the client's bytes are kept exactly."""
    proxy = start_diagnosing_proxy(vendor_diagnostics=True)
    sent: list[bytes] = []

    def keep(request: httpx2.Request) -> None:
        sent.append(request.read())

    http = httpx2.Client(event_hooks={"request": [keep]})
    with anthropic.Anthropic(
        base_url=proxy.url, api_key=KEY, max_retries=0, http_client=http
    ) as client:

        def turn(*texts: str, stream: bool = False) -> str:
            payload = body(*texts)
            if stream:
                with client.messages.stream(**payload) as events:
                    rid = events.get_final_message().id
            else:
                rid = client.messages.create(**payload).id
            proxy.rows(len(sent))  # logged before the next turn (see post)
            return rid

        a1 = turn("Where is order 1234?")
        b1 = turn("What does the A-100 weigh?", stream=True)
        a2 = turn("Where is order 1234?", "ok", "When does it ship?", stream=True)
        b2 = turn("What does the A-100 weigh?", "ok", "And in pounds?")
    received = diagnostics_vendor.vendor.bodies
    assert received == [
        with_member(sent[0], None),
        with_member(sent[1], None),
        with_member(sent[2], a1),
        with_member(sent[3], b1),
    ]
    rows = {r["response_id"]: r for r in proxy.rows(4)}
    assert rows[a2]["vendor_comparison_id"] == a1 and rows[b2]["vendor_comparison_id"] == b1
    assert rows[a2]["vendor_miss_reason"] == rows[b2]["vendor_miss_reason"] == "no_divergence"


def test_a_client_that_asks_itself_and_other_routes_are_left_alone(
    start_diagnosing_proxy: Callable[..., RunningProxy], diagnostics_vendor: VendorServer
) -> None:
    proxy = start_diagnosing_proxy(vendor_diagnostics=True)
    own = odd_bytes({**body("Hello"), "diagnostics": {"previous_message_id": None}})
    post(proxy, own)
    responses = json.dumps({"model": "gpt-5.6", "input": "Reply with exactly OK."}).encode()
    reply = httpx.post(proxy.url + "/v1/responses", content=responses,
                       headers={"authorization": "Bearer sk-test-0123456789abcdef"})  # fmt: skip
    assert reply.status_code == 200
    assert diagnostics_vendor.vendor.bodies == [own, responses]
    rows = proxy.rows(2)
    assert [r["vendor_diagnostics_added"] for r in rows] == [None, None]


def test_another_server_of_the_messages_api_is_not_asked(
    start_diagnosing_proxy: Callable[..., RunningProxy], diagnostics_vendor: VendorServer
) -> None:
    """An upstream that speaks the Messages API but is not Anthropic (``vendor`` other than
    ``anthropic``) gets the client's bytes as they are, and its silence about a previous
    message the client named is not taken for "no divergence"."""
    other = UpstreamConfig(name="anthropic", url=diagnostics_vendor.url, vendor="openai_compatible")
    proxy = start_diagnosing_proxy(vendor_diagnostics=True, upstreams={"anthropic": other})
    first = odd_bytes({**body("Hi"), "diagnostics": {"previous_message_id": None}})
    answer = post(proxy, first)
    plain = odd_bytes(body("Hi", "ok", "Again"))
    post(proxy, plain)
    asked = {**body("Hi", "ok", "Again", "ok", "More"),
             "diagnostics": {"previous_message_id": answer["id"]}}  # fmt: skip
    post(proxy, odd_bytes(asked))
    assert diagnostics_vendor.vendor.bodies == [first, plain, odd_bytes(asked)]
    rows = proxy.rows(3)
    assert [r["vendor_diagnostics_added"] for r in rows] == [None, None, None]
    assert rows[2]["vendor_comparison_id"] == answer["id"]
    assert list(diagnostics_vendor.vendor.sent.values())[2] is None  # the server said nothing
    assert rows[2]["vendor_miss_reason"] is None  # ... which is not "no divergence" from it


def test_without_the_flag_the_body_is_forwarded_as_it_came(
    start_diagnosing_proxy: Callable[..., RunningProxy], diagnostics_vendor: VendorServer
) -> None:
    proxy = start_diagnosing_proxy()
    raws = [odd_bytes(body("Hi")), odd_bytes(body("Hi", "ok", "Again"))]
    for raw in raws:
        assert "diagnostics" not in post(proxy, raw)
    assert diagnostics_vendor.vendor.bodies == raws
    assert {r["vendor_diagnostics_added"] for r in proxy.rows(2)} == {None}


def test_after_a_restart_the_previous_response_comes_from_the_log(
    start_diagnosing_proxy: Callable[..., RunningProxy],
    diagnostics_vendor: VendorServer,
    tmp_path: Path,
) -> None:
    db = tmp_path / "shared.db"
    before = start_diagnosing_proxy(vendor_diagnostics=True, db_path=db)
    first = post(before, odd_bytes(body("Where is order 1234?")))
    before.rows(1)
    before.server.stop()
    after = start_diagnosing_proxy(vendor_diagnostics=True, db_path=db)
    second_raw = odd_bytes(body("Where is order 1234?", "ok", "When does it ship?"))
    post(after, second_raw)
    assert diagnostics_vendor.vendor.bodies[-1] == with_member(second_raw, first["id"])
    assert after.rows(2)[1]["vendor_comparison_id"] == first["id"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_cli(args: list[str], calls: list[bytes]) -> str:
    """Start ``promptcache proxy ARGS --port P``, POST each of ``calls`` to /v1/messages, stop
    it with SIGINT; returns its stderr."""
    port = free_port()
    command = [sys.executable, "-c", "from promptcache.cli import main; main()", "proxy",
               *args, "--port", str(port), "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, url + "/healthz")
        for raw in calls:
            reply = httpx.post(url + "/v1/messages", content=raw, headers=HEADERS)
            assert reply.status_code == 200, reply.text
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    return stderr


def test_the_cli_flag_and_the_config_key(diagnostics_vendor: VendorServer, tmp_path: Path) -> None:
    calls = [odd_bytes(body("Hi")), odd_bytes(body("Hi", "ok", "Again"))]
    upstream = f'[upstreams.mock]\nurl = "{diagnostics_vendor.url}"\nvendor = "anthropic"\n'
    plain = tmp_path / "plain.toml"
    plain.write_text(f'default_upstream = "mock"\n\n{upstream}')
    flag_db = tmp_path / "flag.db"
    stderr = run_cli(["--config", str(plain), "--db", str(flag_db), "--vendor-diagnostics"], calls)
    assert "asking Anthropic for its cache diagnostics" in stderr
    first_id = read_rows(flag_db)[0]["response_id"]
    assert diagnostics_vendor.vendor.bodies == [
        with_member(calls[0], None),
        with_member(calls[1], first_id),
    ]

    config = tmp_path / "proxy.toml"
    config.write_text(f'vendor_diagnostics = true\ndefault_upstream = "mock"\n\n{upstream}')
    config_db = tmp_path / "config.db"
    run_cli(["--config", str(config), "--db", str(config_db)], calls[:1])
    assert diagnostics_vendor.vendor.bodies[-1] == with_member(calls[0], None)
    assert [r["vendor_diagnostics_added"] for r in read_rows(config_db)] == [1]
    assert [r["vendor_diagnostics_added"] for r in read_rows(flag_db)] == [1, 1]
