"""Request ids: UUIDv7 layout, unique, sorted by arrival."""

from __future__ import annotations

import time
import uuid

from promptcache.proxy.record import RequestRecord, new_request_id


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


def test_ids_take_each_random_number_of_a_read_once_and_a_child_reads_its_own() -> None:
    from promptcache.proxy import record

    record._RANDOMS.clear()  # what a forked child does first (os.register_at_fork)
    new_request_id()
    assert len(record._RANDOMS) == record._RANDOMS_A_READ - 1  # one read, one number taken
    held = list(record._RANDOMS)
    ids = [new_request_id() for _ in range(len(held))]
    assert record._RANDOMS == []
    assert len(set(ids)) == len(ids) and all(uuid.UUID(hex=i).version == 7 for i in ids)
    record._RANDOMS.clear()
    new_request_id()
    assert len(record._RANDOMS) == len(held)
    assert held != record._RANDOMS  # a new read, not the numbers already handed out


def test_a_begun_record_is_the_one_init_makes() -> None:
    begun = RequestRecord.begin(1764900000.5, "/v1/chat/completions", "openai_chat")
    made = RequestRecord(
        id="", started_at=1764900000.5, route="/v1/chat/completions", api="openai_chat"
    )
    assert begun == made
    assert list(begun.__dict__.items()) == list(made.__dict__.items())
    assert begun.as_row() == made.as_row()


def test_begun_records_share_no_field() -> None:
    first = RequestRecord.begin(1.0, "/v1/messages", "anthropic")
    first.status = 200
    first.model = "claude"
    second = RequestRecord.begin(2.0, "/v1/messages", "anthropic")
    assert second.status is None and second.model is None and second.id == ""
    assert second != first
