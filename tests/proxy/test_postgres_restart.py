"""A proxy on a Postgres log rebuilds its memory from the log at start, as on a SQLite file.

The cache-break explainer's families and ``--vendor-diagnostics``' response ids are read back
from the shared log (every proxy's rows of the last two hours): a conversation's next turn
after a restart, or sent to another proxy of the fleet started after its first turn, is
compared with that turn (no ``new_prefix``) and names its response to the vendor. Real
Postgres (pg_server.py), the mock vendor of ``diagnostics_vendor.py`` on 127.0.0.1.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from diagnostics_vendor import VendorServer, diagnostics_vendor_fixture  # noqa: F401 (fixture)
from proxy_support import mock_config
from servers import ServerThread

from promptcache.proxy.app import build_app
from promptcache.proxy.store import open_log

HEADERS = {
    "x-api-key": "sk-ant-api03-postgres-restart-0123456789",
    "anthropic-version": "2023-06-01",
}
SYSTEM = "You answer questions about the Acme Anvils catalogue, briefly. " * 40


def body(*texts: str) -> dict[str, Any]:
    """A Messages body whose conversation alternates ``texts`` (user first)."""
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 16,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": t}
            for i, t in enumerate(texts)
        ],
    }


def rows(url: str, count: int) -> list[dict[str, Any]]:
    """The log's rows, oldest first, once there are ``count``."""
    deadline = time.monotonic() + 10
    while True:
        db = open_log(url)
        try:
            cursor = db.execute(
                "SELECT id, response_id, vendor_comparison_id, break_reason, previous_request_id"
                " FROM requests ORDER BY started_at"
            )
            names = [d[0] for d in cursor.description]
            found = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            db.close()
        if len(found) >= count or time.monotonic() > deadline:
            assert len(found) == count, found
            return found
        time.sleep(0.05)


def test_restarted_and_other_proxies_read_the_turns_back_from_postgres(
    diagnostics_vendor: VendorServer, pg_url: str
) -> None:
    config = mock_config(diagnostics_vendor.url, pg_url, vendor_diagnostics=True)  # type: ignore[arg-type]
    with ServerThread(build_app(config)) as first:
        one = httpx.post(
            first.url + "/v1/messages", json=body("Price of anvil 7?"), headers=HEADERS
        )
        assert one.status_code == 200, one.text
    # stopped cleanly: its row is in the log; a restarted proxy and a second one both know it
    rows(pg_url, 1)
    restarted = ServerThread(build_app(config))
    other = ServerThread(build_app(config))
    with restarted, other:
        two = httpx.post(
            restarted.url + "/v1/messages",
            json=body("Price of anvil 7?", "40 USD", "And anvil 8?"),
            headers=HEADERS,
        )
        assert two.status_code == 200, two.text
        three = httpx.post(
            other.url + "/v1/messages",
            json=body("Price of anvil 7?", "40 USD", "And anvil 9?"),
            headers=HEADERS,
        )
        assert three.status_code == 200, three.text
    logged = rows(pg_url, 3)
    first_id, first_response = logged[0]["id"], one.json()["id"]
    assert [row["response_id"] for row in logged] == [
        first_response,
        two.json()["id"],
        three.json()["id"],
    ]
    for row in logged[1:]:
        assert row["previous_request_id"] == first_id
        assert row["break_reason"] is None
        assert row["vendor_comparison_id"] == first_response
    sent = [b for b in diagnostics_vendor.vendor.bodies[1:]]
    assert all(
        b.startswith(b'{"diagnostics":{"previous_message_id":"' + first_response.encode() + b'"},')
        for b in sent
    ), sent
