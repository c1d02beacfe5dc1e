"""``segment_hashes_json``: the ``segment_hashes`` column is ``json.dumps`` of the segments'
objects, whether an item's text is made now or taken from the items already made."""

from __future__ import annotations

import json
import random

from promptcache.fingerprint import Segment, fingerprint_request
from promptcache.proxy import enrich
from promptcache.proxy.enrich import segment_hashes_json


def dumped(segments: list[Segment]) -> str:
    return json.dumps(
        [
            {
                "path": s.path,
                "kind": s.kind,
                "sha256": s.sha256,
                "num_chars": s.num_chars,
                "num_tokens": s.num_tokens,
            }
            for s in segments
        ]
    )


def test_a_conversation_turn_by_turn_gives_json_dumps_text_every_time() -> None:
    rng = random.Random(7)
    messages = [{"role": "system", "content": "You are a careful librarian. Ünïcode ☃ stays."}]
    for turn in range(6):
        words = " ".join(rng.choice(["shelf", "atlas", "índice", "quiet"]) for _ in range(9))
        messages.append({"role": "user", "content": f"turn {turn}: {words}"})
        segments = fingerprint_request({"model": "m", "messages": messages}, "openai_chat").segments
        # the first call makes the new items, the second takes every item already made
        assert segment_hashes_json(segments) == dumped(segments)
        assert segment_hashes_json(segments) == dumped(segments)
        messages.append({"role": "assistant", "content": f"answer {turn}"})


def test_no_segments_is_an_empty_list() -> None:
    assert segment_hashes_json([]) == "[]" == dumped([])


def test_a_segment_that_differs_in_one_value_only_gets_its_own_item() -> None:
    known = Segment("messages[0]", "system", "ab" * 32, 12, "x" * 12, 3)
    unknown_tokens = Segment("messages[0]", "system", "ab" * 32, 12, "x" * 12, None)
    other_kind = Segment("messages[0]", "messages", "ab" * 32, 12, "x" * 12, 3)
    for segments in ([known], [unknown_tokens], [other_kind], [known, unknown_tokens]):
        assert segment_hashes_json(segments) == dumped(segments)
    assert '"num_tokens": null' in segment_hashes_json([unknown_tokens])


def test_the_items_kept_are_bounded() -> None:
    before = dict(enrich._SEGMENT_ITEMS)
    try:
        enrich._SEGMENT_ITEMS.clear()
        for i in range(enrich._SEGMENT_ITEMS_MAX + 5):
            segment = Segment(f"messages[{i}]", "messages", f"{i:064x}", i, "", i)
            assert segment_hashes_json([segment]) == dumped([segment])
        assert len(enrich._SEGMENT_ITEMS) <= enrich._SEGMENT_ITEMS_MAX
    finally:
        enrich._SEGMENT_ITEMS.clear()
        enrich._SEGMENT_ITEMS.update(before)
