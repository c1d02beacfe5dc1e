"""The cache-break explainer on real fingerprints: reasons, fallbacks, TTLs, bounds, rebuild.

Each test feeds ``BreakExplainer.explain`` request fingerprints made by the SDK from vendor
bodies; the end-to-end path through a live proxy is in test_breaks_e2e.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptcache.fingerprint import fingerprint_request
from promptcache.proxy.breaks import (
    BreakExplainer,
    BreakExplanation,
    PrefixSnapshot,
    classify_change,
)
from promptcache.proxy.enrich import describe_prompt
from promptcache.proxy.record import RequestRecord
from promptcache.proxy.store import RequestStore

LONG = "You are the billing assistant of Acme Anvils; answer from the manual only. " * 80
MODEL = "claude-sonnet-4-5"


def tool(name: str, description: str = "Look up an order.") -> dict[str, Any]:
    return {"name": name, "description": description, "input_schema": {"type": "object"}}


def body(
    *,
    system: str = LONG,
    tools: list[dict[str, Any]] | None = None,
    messages: list[str] = ("hello",),  # type: ignore[assignment]
    model: str = MODEL,
    ttl: str | None = None,
    breakpoint: bool = True,
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": system}
    if breakpoint:
        block["cache_control"] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    msgs: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(messages)
    ]
    out: dict[str, Any] = {"model": model, "system": [block], "messages": msgs}
    if tools is not None:
        out["tools"] = tools
    if breakpoint:
        out["cache_control"] = {"type": "ephemeral"}  # automatic caching: last block too
    return out


class Driver:
    """Feeds requests to one explainer with a settable clock."""

    def __init__(self, explainer: BreakExplainer | None = None, *, vendor: str = "anthropic"):
        self.explainer = explainer if explainer is not None else BreakExplainer()
        self.vendor = vendor
        self.count = 0

    def send(
        self,
        request: dict[str, Any],
        at: float,
        *,
        read: int | None = 100,
        write: int | None = 0,
        key: str = "k1",
        api: str = "anthropic",
        ready_after: float = 0.5,
        excerpt: bool = False,
    ) -> BreakExplanation:
        self.count += 1
        snap = PrefixSnapshot(
            request_id=f"r{self.count}",
            started_at=at,
            ready_at=at + ready_after,
            vendor=self.vendor,
            key_fingerprint=key,
            fingerprint=fingerprint_request(request, api),
            has_text=True,
        )
        return self.explainer.explain(
            snap, cache_read_tokens=read, cache_write_tokens=write, with_excerpt=excerpt
        )


def test_growing_history_is_not_a_break() -> None:
    d = Driver()
    assert d.send(body(), 0).reason == "new_prefix"
    grown = d.send(body(messages=["hello", "hi!", "more"]), 10)
    family = fingerprint_request(body(), "anthropic").segments[0].sha256
    assert grown == BreakExplanation(
        None, previous_request_id="r1", expected_hit=True, gap_s=10, prefix_family=family
    )


def test_timestamp_in_the_first_segment_is_found_through_the_edit_fallback() -> None:
    # no tools: system[0] is the first segment, so the family (key, model, first) is new
    d = Driver()
    d.send(body(system=LONG + "Now: 09:00"), 0)
    result = d.send(body(system=LONG + "Now: 09:05"), 10)
    assert result.reason == "system_changed"
    assert result.segment == "system[0].text"
    # the position counts characters of the text the user wrote, not of the segment's JSON
    assert result.offset == len(LONG + "Now: 09:0")
    assert result.previous_request_id == "r1"


def test_a_time_and_an_id_at_the_very_start_are_an_edit_with_the_users_positions() -> None:
    # the naive demo app: "Current time: ... Request id: ..." first, then the instructions
    d = Driver()
    first = "Current time: 10:16:21. Request id: 3fa9c2d4e5f6.\n" + LONG
    d.send(body(system=first), 0)
    later = "Current time: 10:17:02. Request id: 9b1e0c7a2d44.\n" + LONG
    result = d.send(body(system=later), 10, excerpt=True)
    assert (result.reason, result.segment) == ("system_changed", "system[0].text")
    assert result.offset == len("Current time: 10:1")
    assert result.excerpt == "-" + first[:48] + "\n+" + later[:48]  # 30 characters after
    # another user of the app: a later time, and their child's name at the end of the prompt
    bob = "Current time: 10:18:40. Request id: 5c3e9a0b7d12.\n" + LONG + "The child is Bob."
    result = d.send(body(system=bob), 15)
    assert (result.reason, result.offset) == ("system_changed", len("Current time: 10:1"))
    assert result.prefix_family == d.send(body(system=first), 16).prefix_family
    # a prompt of another app sharing a short opening is still its own prefix
    other = "Current time: 10:18:00. You translate the user's text into French. " * 40
    assert d.send(body(system=other), 20).reason == "new_prefix"


def test_an_unrelated_prompt_is_a_new_prefix_not_a_change() -> None:
    d = Driver()
    d.send(body(system=LONG), 0)
    other = "Translate the user's text into French, keeping the formatting. " * 60
    assert d.send(body(system=other), 5).reason == "new_prefix"


def test_reordered_and_changed_tools() -> None:
    a, b, c = tool("a"), tool("b"), tool("c")
    d = Driver()
    d.send(body(tools=[a, b, c]), 0)
    assert d.send(body(tools=[b, a, c]), 10).reason == "tools_reordered"
    changed = d.send(body(tools=[b, a, tool("c", "Look up a parcel.")]), 20)
    assert (changed.reason, changed.segment) == ("tools_changed", "tools[2].description")


def test_model_switch_is_model_changed_and_switching_back_hits() -> None:
    d = Driver()
    d.send(body(), 0)
    assert d.send(body(model="claude-opus-4-1"), 10).reason == "model_changed"
    back = d.send(body(), 20)
    assert back.reason is None and back.previous_request_id == "r1" and back.expected_hit


def test_messages_edited_in_place_vs_history_rewritten() -> None:
    d = Driver()
    d.send(body(messages=["q1", "a1", "q2"]), 0)
    edited = d.send(body(messages=["q1 (edited)", "a1", "q2"]), 10)
    assert (edited.reason, edited.segment) == ("messages_changed", "messages[0].content")
    dropped = d.send(body(messages=["a1", "q2", "a2", "q3"]), 20)
    assert dropped.reason == "history_rewritten"
    truncated = d.send(body(messages=["a1"]), 30)
    assert (truncated.reason, truncated.segment) == ("history_rewritten", "messages[1]")


def test_a_new_last_question_is_the_tail_not_a_break() -> None:
    # A stateless app: the same system prompt, a different single question each time.
    d = Driver()
    d.send(body(messages=["What is 2 + 2?"]), 0)
    for at, question in ((10, "Name a prime."), (20, "Spell cat.")):
        result = d.send(body(messages=[question]), at)
        assert result.reason is None and result.expected_hit
    # but editing that message inside a longer history is still a break
    d.send(body(messages=["q1"]), 30)
    rewritten = d.send(body(messages=["q1 (edited)", "a1", "q2"]), 40)
    assert rewritten.reason == "messages_changed"


def test_a_lone_marked_message_changed_at_its_end_is_no_expected_hit_on_anthropic() -> None:
    # Anthropic reads only whole blocks up to a breakpoint: a request whose one message (its
    # breakpoint on it) kept a long start but changed its end shares no cached block, so a
    # read of 0 is what it should get, not an unexpected miss
    def lone(question: str, *, marked: bool = True) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": LONG + question}
        if marked:
            block["cache_control"] = {"type": "ephemeral"}
        return {"model": MODEL, "messages": [{"role": "user", "content": [block]}]}

    d = Driver()
    assert d.send(lone("Name a prime."), 0, read=0, write=1200).reason == "new_prefix"
    again = d.send(lone("Spell cat."), 10, read=0, write=1200)
    assert (again.reason, again.previous_request_id, again.expected_hit) == (None, "r1", False)
    # where the upstream caches every prefix by itself, the kept start is read: expected
    auto = Driver(vendor="openai")
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": LONG + "Name a prime."}]}
    auto.send(chat, 0, read=0, api="openai_chat")
    chat["messages"][0]["content"] = LONG + "Spell cat."
    assert auto.send(chat, 10, read=0, api="openai_chat").expected_hit


def test_a_new_conversation_after_a_longer_one_is_not_a_break() -> None:
    # The same system prompt, then a 3-turn story; then a new story starts with its own first
    # question: it reads the system prompt and has nothing else that could have been cached.
    d = Driver()
    d.send(body(messages=["story 1, part 1"]), 0)
    d.send(body(messages=["story 1, part 1", "once upon a time", "part 2"]), 10)
    d.send(body(messages=["story 1, part 1", "once upon a time", "part 2", "then", "part 3"]), 20)
    new = d.send(body(messages=["story 2, part 1"]), 30)
    assert new.reason is None and new.expected_hit
    # a rewritten history with turns after the change is still a break
    rewritten = d.send(body(messages=["story 2, part 1 (edited)", "a1", "q2"]), 40)
    assert rewritten.reason == "messages_changed"


def test_a_change_after_the_last_breakpoint_is_not_a_break() -> None:
    d = Driver()
    request = body(messages=["q1"])
    del request["cache_control"]  # only the system block is cached
    d.send(request, 0)
    request["messages"][0]["content"] = "a different question"
    result = d.send(request, 10)
    assert result.reason is None and result.expected_hit


@pytest.mark.parametrize(
    ("ttl", "gap", "expired"),
    [(None, 299, False), (None, 301, True), ("1h", 3000, False), ("1h", 3601, True)],
)
def test_ttl_expiry_follows_the_breakpoint_ttl(ttl: str | None, gap: float, expired: bool) -> None:
    d = Driver()
    d.send(body(ttl=ttl), 0)
    result = d.send(body(ttl=ttl), gap, read=0)  # the vendor read nothing back
    assert result.reason == ("ttl_expired" if expired else None)
    assert result.gap_s == gap


def test_a_cache_read_past_the_ttl_is_no_expiry() -> None:
    # the vendor kept the prefix longer than its TTL (or another request refreshed it)
    d = Driver()
    d.send(body(), 0)
    result = d.send(body(), 400, read=100)
    assert result.reason is None and result.expected_hit


def test_engine_upstream_has_no_ttl() -> None:
    d = Driver(vendor="engine")
    chat = {"model": "tiny", "messages": [{"role": "system", "content": LONG}]}
    d.send(chat, 0, api="openai_chat")
    assert d.send(chat, 7200, api="openai_chat").reason is None


@pytest.mark.parametrize("vendor", ["engine", "openai_compatible"])
def test_a_prompt_within_one_kv_block_is_below_the_engine_minimum(vendor: str) -> None:
    # A self-hosted engine caches whole 16-token blocks and recomputes the last token: a repeated
    # ten-token prompt reads nothing and is not an unexpected miss.
    d = Driver(vendor=vendor)
    short = {"model": "tiny", "messages": [{"role": "user", "content": "Tell me a story."}]}
    d.send(short, 0, read=0, api="openai_chat")
    again = d.send(short, 1, read=0, api="openai_chat")
    assert again.reason == "below_minimum" and not again.expected_hit
    # past one block, a repeat with no cache read is the engine's fault: an expected hit
    long = {"model": "tiny", "messages": [{"role": "system", "content": LONG}]}
    d.send(long, 2, read=0, api="openai_chat")
    assert d.send(long, 3, read=0, api="openai_chat").expected_hit


def test_a_self_hosted_upstream_uses_the_table_row_of_a_known_model() -> None:
    d = Driver(vendor="openai_compatible")
    chat = {"model": "gpt-4o", "messages": [{"role": "system", "content": "Be brief. " * 40}]}
    assert d.send(chat, 0, read=0, api="openai_chat").reason == "below_minimum"  # < 1,024


def test_below_minimum_and_missing_breakpoint_need_zero_cache_activity() -> None:
    d = Driver()
    short = body(system="Be brief.")
    assert d.send(short, 0, read=0, write=0).reason == "below_minimum"
    # the vendor did cache it, so our minimum must be wrong: no below_minimum
    assert d.send(short, 10, read=50, write=0).reason is None
    no_marker = body(breakpoint=False)
    assert d.send(no_marker, 20, read=0, write=0).reason == "breakpoint_missing"
    # OpenAI caches without markers: a missing breakpoint is not a reason there
    chat = {"model": "gpt-4o", "messages": [{"role": "system", "content": LONG}]}
    assert d.send(chat, 30, read=0, write=0, api="openai_chat").reason == "new_prefix"


def test_a_predecessor_still_in_flight_is_not_an_expected_hit() -> None:
    d = Driver()
    d.send(body(), 0, ready_after=5.0)  # first byte only at t=5
    parallel = d.send(body(), 1)
    assert parallel.reason is None and not parallel.expected_hit


def test_a_late_finisher_does_not_replace_a_newer_snapshot() -> None:
    d = Driver()
    d.send(body(messages=["q1", "a1", "q2"]), 10)
    d.send(body(messages=["q1"]), 5)  # started earlier, finished later
    assert d.send(body(messages=["q1", "a1", "q2", "a2"]), 20).previous_request_id == "r1"


def test_excerpts_only_when_asked_and_redacted() -> None:
    d = Driver()
    key = "sk-ant-api03-" + "x" * 30
    d.send(body(system=LONG + "token A"), 0)
    result = d.send(body(system=LONG + f"token {key}"), 10, excerpt=True)
    assert result.excerpt is not None and key not in result.excerpt
    assert "[REDACTED]" in result.excerpt and result.excerpt.startswith("-")
    assert d.send(body(system=LONG + "token B"), 20).excerpt is None


def test_state_is_bounded_by_families_and_by_characters() -> None:
    d = Driver(BreakExplainer(max_families=2))
    for i in range(3):
        d.send(body(system=f"Prompt number {i}. " + LONG), i, key=f"k{i}")
    assert len(d.explainer) == 2
    assert d.send(body(system="Prompt number 0. " + LONG), 10, key="k0").reason == "new_prefix"
    small = Driver(BreakExplainer(max_text_chars=len(LONG) * 3))
    for i in range(4):
        small.send(body(system=f"Prompt number {i}. " + LONG), i, key=f"k{i}")
    assert len(small.explainer) <= 3


def test_classify_change_directly() -> None:
    a, b = tool("a"), tool("b")
    old = fingerprint_request(body(tools=[a, b]), "anthropic")
    assert classify_change(old, fingerprint_request(body(tools=[b, a]), "anthropic"), 0) == (
        "tools_reordered"
    )
    assert classify_change(old, fingerprint_request(body(tools=[a]), "anthropic"), 1) == (
        "tools_changed"
    )


def _record(request: dict[str, Any], rid: str, at: float, *, stored: bool) -> RequestRecord:
    record = RequestRecord(
        id=rid, started_at=at, first_byte_at=at + 0.2, vendor="anthropic", api="anthropic",
        route="/v1/messages", model=MODEL, key_fingerprint="k1", status=200, stream=0,
        cache_read_tokens=0, cache_write_5m_tokens=2000, cache_write_1h_tokens=0,
        cache_write_unknown_tokens=0, uncached_input_tokens=10, output_tokens=5,
        reasoning_tokens=0, total_input_tokens=2010,
    )  # fmt: skip
    describe_prompt(record, request, "anthropic")
    if stored:
        record.request_body = json.dumps(request)
    return record


@pytest.mark.parametrize("stored", [False, True])
def test_state_is_rebuilt_from_the_log(tmp_path: Path, stored: bool) -> None:
    store = RequestStore(tmp_path / "log.db")
    store.start()
    first = BreakExplainer()
    tools = [tool("a"), tool("b")]  # the family is found by its first segment, tools[0]
    record = _record(body(system=LONG + "Now: 09:00", tools=tools), "r1", 1000.0, stored=stored)
    first(record)
    store.submit(record.as_row())
    store.close()

    second = BreakExplainer()
    assert second.load(tmp_path / "log.db", since=0) == 1
    after = _record(body(system=LONG + "Now: 09:05", tools=tools), "r2", 1010.0, stored=stored)
    second(after)
    assert (after.break_reason, after.previous_request_id) == ("system_changed", "r1")
    if stored:  # texts come back from the stored body: offsets and excerpts too
        assert after.break_segment == "system[0].text" and after.break_offset is not None
        assert after.break_excerpt is not None
    else:  # hashes only: the segment, not the character
        assert after.break_segment == "system[0]" and after.break_offset is None


def test_the_hook_ignores_failed_requests() -> None:
    explainer = BreakExplainer()
    record = _record(body(), "r1", 0.0, stored=False)
    record.status = 529
    explainer(record)
    assert record.break_reason is None and len(explainer) == 0


def test_below_one_kv_block_uses_the_engines_prompt_token_count() -> None:
    # cl100k estimates this prompt at more than one 16-token block, but the engine's own
    # tokenizer made 15 prompt tokens of it: a repeat reads nothing and that is no miss.
    explainer = BreakExplainer()
    prompt = "Once upon a time, a girl named Lily found a shiny red ball in the park."
    request = {"model": "tiny", "messages": [{"role": "user", "content": prompt}]}
    rows = []
    for i in range(2):
        record = RequestRecord(
            id=f"r{i}", started_at=float(i), first_byte_at=i + 0.1, vendor="engine",
            api="openai_chat", route="/v1/chat/completions", model="tiny", key_fingerprint="k",
            status=200, stream=0, uncached_input_tokens=15, cache_read_tokens=0,
            cache_write_5m_tokens=0, cache_write_1h_tokens=0, cache_write_unknown_tokens=0,
            output_tokens=8, reasoning_tokens=0, total_input_tokens=15,
        )  # fmt: skip
        describe_prompt(record, request, "openai_chat")
        assert record.approx_prefix_tokens is not None and record.approx_prefix_tokens >= 17
        explainer(record)
        rows.append(record)
    assert (rows[1].break_reason, rows[1].expected_hit, rows[1].unexpected_miss) == (
        "below_minimum",
        0,
        0,
    )
    # past one block by the engine's count, the same repeat is an unexpected miss
    longer = RequestRecord(**{**rows[1].as_row(), "id": "r2", "started_at": 2.0,
                              "first_byte_at": 2.1, "total_input_tokens": 40,
                              "uncached_input_tokens": 40})  # fmt: skip
    describe_prompt(longer, request, "openai_chat")
    explainer(longer)
    assert (longer.break_reason, longer.unexpected_miss) == (None, 1)


def test_shared_prefix_and_extension_by_hash_match_a_segment_walk() -> None:
    """``shared_prefix_chars`` and ``extended_by`` (tuple comparisons of the segment hashes)
    against a plain walk over the segments, on conversations that share, extend, fork and
    change, with and without a breakpoint (a cached extent short of the last segment)."""
    import random

    rng = random.Random(41)
    turns = ["hello", "hi there", "what is due?", "the invoice", "thanks", "bye", "again"]
    snaps = []
    for i in range(40):
        messages = turns[: rng.randint(1, len(turns))]
        if rng.random() < 0.3:
            messages = [*messages[:-1], f"changed {i}"]
        request = body(
            system=rng.choice([LONG, LONG + " v2"]),
            tools=rng.choice([None, [tool("a")], [tool("a"), tool("b")]]),
            messages=messages,
            breakpoint=rng.random() < 0.7,
        )
        fingerprint = fingerprint_request(request, "anthropic")
        snaps.append(
            PrefixSnapshot(f"r{i}", float(i), float(i), "anthropic", "k", fingerprint, True)
        )

    def shared_walk(old: PrefixSnapshot, new: PrefixSnapshot) -> int:
        shared = 0
        for a, b in zip(old.fingerprint.segments[: old.cached_extent + 1],
                        new.fingerprint.segments, strict=False):  # fmt: skip
            if a.sha256 != b.sha256:
                break
            shared += a.num_chars
        return shared

    def extended_walk(old: PrefixSnapshot, new: PrefixSnapshot) -> bool:
        if new.cached_extent < old.cached_extent:
            return False
        new_segments = new.fingerprint.segments
        return all(
            i < len(new_segments) and new_segments[i].sha256 == seg.sha256
            for i, seg in enumerate(old.fingerprint.segments)
        )

    kinds = set()
    for old in snaps:
        for new in snaps:
            assert old.shared_prefix_chars(new.fingerprint) == shared_walk(old, new)
            assert old.extended_by(new) == extended_walk(old, new)
            kinds.add((shared_walk(old, new) > 0, extended_walk(old, new)))
    assert kinds >= {(False, False), (True, False), (True, True)}


def test_remembering_keeps_what_sorting_the_whole_family_kept() -> None:
    """The explainer's memory (each family's snapshots in start order, the text characters held)
    against the plain rule: drop the snapshots the new one extends, add it, sort by start, keep
    the latest SNAPSHOTS_PER_FAMILY, recount the characters; on requests that finish out of
    start order (equal starts included), extend, fork and fill families past the limit."""
    import random

    from promptcache.proxy.breaks import SNAPSHOTS_PER_FAMILY

    rng = random.Random(7)
    turns = [f"turn {i}" for i in range(8)]
    explainer = BreakExplainer()
    families: dict[Any, list[PrefixSnapshot]] = {}
    chars = 0
    for i in range(400):
        messages = turns[: rng.randint(1, len(turns))]
        if rng.random() < 0.6:
            messages = [*messages[:-1], f"changed {i}"]
        request = body(system=rng.choice([LONG, LONG + " v2"]), messages=messages)
        fingerprint = fingerprint_request(request, "anthropic")
        started = float(i // 2 - rng.choice([0, 0, 0, 1, 3]))  # late finishers, equal starts
        snap = PrefixSnapshot(f"r{i}", started, started, "anthropic", "k", fingerprint, True)
        explainer.remember(snap)
        snaps = families.get(snap.family, [])
        if not any(s.started_at > snap.started_at and snap.extended_by(s) for s in snaps):
            kept = sorted([*(s for s in snaps if not s.extended_by(snap)), snap],
                          key=lambda s: s.started_at)[-SNAPSHOTS_PER_FAMILY:]  # fmt: skip
            chars += sum(s.num_chars for s in kept) - sum(s.num_chars for s in snaps)
            families[snap.family] = kept
        ours = explainer._families.get(snap.family, [])
        assert [s.request_id for s in ours] == [s.request_id for s in families[snap.family]]
        assert explainer._chars == chars
    assert max(len(v) for v in families.values()) == SNAPSHOTS_PER_FAMILY
