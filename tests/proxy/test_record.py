"""Request ids: UUIDv7 layout, unique, sorted by arrival."""

from __future__ import annotations

import time
import uuid

from promptcache.proxy.record import new_request_id


def test_request_ids_are_uuid7_hex_unique_and_time_ordered() -> None:
    before_ms = time.time_ns() // 1_000_000
    first = [new_request_id() for _ in range(5000)]
    time.sleep(0.002)
    later = new_request_id()
    after_ms = time.time_ns() // 1_000_000
    assert len(set(first)) == len(first)
    for rid in (*first[:50], later):
        assert len(rid) == 32 and rid == rid.lower()
        parsed = uuid.UUID(hex=rid)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
        assert before_ms <= int(rid[:12], 16) <= after_ms
    # a later millisecond always sorts after every earlier id
    assert later > max(first)
    # random bits differ within one millisecond
    assert len({rid[13:] for rid in first}) == len(first)
