"""Which relayed stream events the proxy decodes after the response (``handler._may_matter``).

Once a stream's model and id are known, an event whose data has no usage, error, terminal or
diagnosis marker is not JSON-decoded. These tests check that no event the log depends on is
ever skipped: every event of the recorded vendor streams in tests/data/vendors/, and escaped
or quoted spellings a vendor could send.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from upstreams import split_events

from promptcache.proxy.handler import _may_matter

VENDORS = Path(__file__).parents[1] / "data" / "vendors"


def _read_fields(payload: dict[str, Any]) -> list[str]:
    """What of ``payload`` the proxy's stream reading uses beyond ``model`` and ``id``."""
    found = [
        key
        for key in ("usage", "usageMetadata", "usage_metadata", "error", "metadata", "metrics")
        if payload.get(key) is not None
    ]
    kind = payload.get("type")
    if isinstance(kind, str) and (kind.startswith(("message_", "response.")) or kind == "error"):
        found.append(kind)
    candidates = payload.get("candidates")
    if isinstance(candidates, list) and any(
        isinstance(c, dict) and c.get("finishReason") for c in candidates
    ):
        found.append("finishReason")
    return found


def _recorded_events() -> list[tuple[str, str]]:
    events = []
    for path in sorted(VENDORS.glob("*/*.sse")):
        for raw in split_events(path.read_bytes()):
            for line in raw.decode().splitlines():
                if line.startswith("data:") and line[5:].strip().startswith("{"):
                    events.append((f"{path.parent.name}/{path.name}", line[5:].strip()))
    return events


RECORDED = _recorded_events()


def test_the_recorded_streams_have_events_of_both_kinds() -> None:
    read = [data for _, data in RECORDED if _read_fields(json.loads(data))]
    skipped = [data for _, data in RECORDED if not _may_matter(data)]
    assert len(RECORDED) > 40 and read and skipped


@pytest.mark.parametrize(("case", "data"), RECORDED)
def test_no_recorded_event_the_log_reads_is_skipped(case: str, data: str) -> None:
    if _read_fields(json.loads(data)):
        assert _may_matter(data), case


@pytest.mark.parametrize(
    "data",
    [
        '{"id":"c1","\\u0075sage":{"prompt_tokens":3}}',  # a key spelled with an escape
        '{"id":"c1","usage":null,"error":{"message":"overloaded"}}',
        '{"id":"c1","usage" : null, "usage": {"prompt_tokens": 3}}',  # the last one wins
        '{"type":"response.completed","response":{"id":"r1"}}',
        '{"type":"message_stop"}',
        '{"candidates":[{"finishReason":"STOP"}]}',
        '{"metadata":{"usage":{"inputTokens":3}},"metrics":{"latencyMs":5}}',
    ],
)
def test_events_with_usage_errors_or_ends_are_read(data: str) -> None:
    assert _read_fields(json.loads(data))
    assert _may_matter(data)


def test_plain_deltas_with_null_usage_are_skipped() -> None:
    delta = '{"id":"c1","model":"m","choices":[{"delta":{"content":"hi"}}],"usage":null}'
    assert not _read_fields(json.loads(delta))
    assert not _may_matter(delta)
    assert not _may_matter('{"type":"content_block_delta","delta":{"text":"x"}}')
