"""``fingerprint_request``'s memo of chain steps: a fingerprint made with the memo warm equals
the one made from scratch (hashes by the definition in the module docstring), and a segment
repeated after another prefix or at another path gets its own step."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from promptcache import fingerprint
from promptcache.canonical import canonical_json_bytes
from promptcache.fingerprint import RequestFingerprint, fingerprint_request


@pytest.fixture
def cold_memos() -> Iterator[None]:
    """Empty the fingerprint's memos (steps and messages) before and after the test."""

    def empty() -> None:
        fingerprint._STEPS.clear()
        fingerprint._steps_chars = 0
        fingerprint._SEGMENTS_BY_MESSAGE.clear()
        fingerprint._segment_memo_chars = 0

    empty()
    try:
        yield
    finally:
        empty()


def by_definition(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(segment hashes, chained hashes) of a plain chat body, computed as the docstring says."""
    shas, chained = [], []
    prev = hashlib.sha256(b"").digest()
    for message in body["messages"]:
        digest = hashlib.sha256(canonical_json_bytes(message)).digest()
        shas.append(digest.hex())
        prev = hashlib.sha256(prev + digest).digest()
        chained.append(prev.hex())
    return shas, chained


def check(fp: RequestFingerprint, body: dict[str, Any]) -> None:
    shas, chained = by_definition(body)
    assert [s.sha256 for s in fp.segments] == shas
    assert fp.chained == chained
    assert fp.prefix_hash == chained[-1]
    assert [s.path for s in fp.segments] == [f"messages[{i}]" for i in range(len(shas))]


def test_a_conversation_turn_by_turn_equals_a_cold_fingerprint(cold_memos: None) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You index old maps."}]
    warm = []
    for turn in range(5):
        messages.append({"role": "user", "content": f"Where is atlas {turn}?"})
        body = {"model": "m", "messages": list(messages)}
        fp = fingerprint_request(body, "openai_chat")
        check(fp, body)
        warm.append((body, fp))
        messages.append({"role": "assistant", "content": f"Shelf {turn * 7}."})
    assert fingerprint._STEPS  # the turns went through the memo
    for body, fp in warm:
        fingerprint._STEPS.clear()
        fingerprint._SEGMENTS_BY_MESSAGE.clear()
        assert fingerprint_request(body, "openai_chat") == fp


def test_the_same_message_after_another_prefix_or_at_another_path_is_its_own_step(
    cold_memos: None,
) -> None:
    same = {"role": "user", "content": "Same words every time."}
    first = {"model": "m", "messages": [{"role": "system", "content": "A"}, same]}
    other_prefix = {"model": "m", "messages": [{"role": "system", "content": "B"}, same]}
    other_path = {"model": "m", "messages": [{"role": "system", "content": "A"}, same, same]}
    fps = [fingerprint_request(b, "openai_chat") for b in (first, other_prefix, other_path)]
    for fp, body in zip(fps, (first, other_prefix, other_path), strict=True):
        check(fp, body)
    assert fps[0].segments[1].sha256 == fps[1].segments[1].sha256
    assert fps[0].chained[1] != fps[1].chained[1]
    assert fps[2].chained[1] == fps[0].chained[1] != fps[2].chained[2]
    assert fps[2].segments[2].path == "messages[2]"


def test_the_memo_is_bounded_by_characters_and_steps(
    cold_memos: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fingerprint, "_STEPS_CHARS", 400)
    monkeypatch.setattr(fingerprint, "_STEPS_MAX", 6)
    for i in range(40):
        body = {"model": "m", "messages": [{"role": "user", "content": f"{i} " + "w" * 50}]}
        check(fingerprint_request(body, "openai_chat"), body)
        assert len(fingerprint._STEPS) <= 6
        assert fingerprint._steps_chars <= 400
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 500}]}
    check(fingerprint_request(big, "openai_chat"), big)  # larger than the whole memo: not kept
    assert all(step[0].num_chars <= 400 for step in fingerprint._STEPS.values())
