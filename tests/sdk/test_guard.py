"""PrefixGuard with a real JSON file and a real SQLite database."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from promptcache.errors import ConfigError
from promptcache.guard import PrefixGuard


def _body(system_text: str, question: str, *, breakpoint: bool = True) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": system_text}
    if breakpoint:
        block["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "You are helpful."}, block],
        "messages": [{"role": "user", "content": question}],
    }


@pytest.mark.parametrize("name", ["guard.json", "guard.db", "guard.sqlite3"])
def test_reports_first_change_in_cached_prefix(tmp_path: Path, name: str) -> None:
    guard = PrefixGuard(tmp_path / name)
    assert guard.last() is None
    assert guard.check(_body("Today is Monday. Rules.", "q1")) is None  # first sight
    assert guard.check(_body("Today is Monday. Rules.", "q2")) is None  # after the breakpoint
    d = guard.check(_body("Today is Tuesday. Rules.", "q3"))
    assert d is not None
    assert (d.segment_path, d.path, d.field_offset) == ("system[1]", "system[1].text", 9)
    assert "Monday" in d.before and "Tuesday" in d.after
    stored = guard.last()
    assert stored is not None and "Tuesday" in stored.segments[1].text
    # a second guard on the same store sees the same state (it is on disk)
    assert PrefixGuard(tmp_path / name).last() == stored


def test_scope_all_and_no_breakpoints(tmp_path: Path) -> None:
    every = PrefixGuard(tmp_path / "all.json", scope="all")
    every.check(_body("Rules.", "q1"))
    d = every.check(_body("Rules.", "q2"))
    assert d is not None and d.path == "messages[0].content"
    auto = PrefixGuard(tmp_path / "auto.json")  # no breakpoints: everything is cached prefix
    auto.check(_body("Rules.", "q1", breakpoint=False))
    assert auto.check(_body("Rules.", "q2", breakpoint=False)) is not None


def test_appended_history_is_not_reported_and_keys_are_separate(tmp_path: Path) -> None:
    guard = PrefixGuard(tmp_path / "g.db")
    body = _body("Rules.", "q1")
    guard.check(body, key="tenant-a")
    longer = copy.deepcopy(body)
    longer["messages"] += [
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ]
    assert guard.check(longer, key="tenant-a") is None
    assert guard.check(_body("Other rules.", "q"), key="tenant-b") is None
    first = guard.last("tenant-a")
    assert first is not None and len(first.segments) == 5


def test_bad_paths_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"must end in \.json"):
        PrefixGuard(tmp_path / "guard.txt")
    with pytest.raises(ConfigError, match=r"scope must be"):
        PrefixGuard(tmp_path / "g.json", scope="some")  # type: ignore[arg-type]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=r"cannot read PrefixGuard file"):
        PrefixGuard(bad).check(_body("x", "y"))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ConfigError, match=r"is not a PrefixGuard file"):
        PrefixGuard(other).last()
    not_db = tmp_path / "not.db"
    not_db.write_text("this is not sqlite" * 100)
    with pytest.raises(ConfigError, match=r"cannot read PrefixGuard database"):
        PrefixGuard(not_db).last()


def _dated(day: str) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": f"You review code. Today is {day}."},
            {"role": "user", "content": "Is this loop fine?"},
        ],
    }


@pytest.mark.parametrize("name", ["guard.json", "guard.db"])
@pytest.mark.parametrize("key", [7, None, ("tenant", 1), "tenant\udc80"])
def test_a_key_that_is_not_text_is_a_config_error(tmp_path: Path, name: str, key: Any) -> None:
    # key=7 or None in a JSON store was written as the text "7" / "null" and looked up as 7 /
    # None, so the guard never found it again and missed every change; in SQLite None raised
    # sqlite_utils' PrimaryKeyRequired and a lone surrogate a UnicodeEncodeError.
    guard = PrefixGuard(tmp_path / name)
    with pytest.raises(ConfigError, match="PrefixGuard key"):
        guard.check(_dated("2026-12-01"), "openai_chat", key=key)
    with pytest.raises(ConfigError, match="PrefixGuard key"):
        guard.last(key)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written, no temp file


@pytest.mark.parametrize("name", ["guard.json", "guard.db"])
@pytest.mark.parametrize("key", ["7", "", "ключ \U0001f511"])
def test_any_text_key_finds_its_fingerprint_again(tmp_path: Path, name: str, key: str) -> None:
    guard = PrefixGuard(tmp_path / name)
    assert guard.check(_dated("2026-12-01"), "openai_chat", key=key) is None
    d = PrefixGuard(tmp_path / name).check(_dated("2026-12-02"), "openai_chat", key=key)
    assert d is not None and d.path == "messages[0].content"
    assert (d.value.kind, d.value.before, d.value.after) == ("a date", "2026-12-01", "2026-12-02")


def _first_sight(args: tuple[str, int]) -> bool:
    path, i = args
    return PrefixGuard(path).check(_dated("2026-12-01"), "openai_chat", key=f"tenant-{i}") is None


def _next_day(args: tuple[str, int]) -> bool:
    path, i = args
    d = PrefixGuard(path).check(_dated("2026-12-02"), "openai_chat", key=f"tenant-{i}")
    return d is not None and d.value is not None and d.value.after == "2026-12-02"


@pytest.mark.parametrize("name", ["guard.json", "guard.db"])
def test_processes_sharing_one_store_lose_no_fingerprint(tmp_path: Path, name: str) -> None:
    # web-server workers share one store. The JSON file was read, updated and replaced without
    # a lock, so concurrent checks dropped each other's keys (82 of 200 changes reported with
    # 8 workers); SQLite raised "database is locked" when two first writes met
    import multiprocessing

    path = str(tmp_path / name)
    jobs = [(path, i) for i in range(120)]
    with multiprocessing.get_context("fork").Pool(6) as pool:
        assert all(pool.map(_first_sight, jobs, chunksize=1))
        assert all(pool.map(_next_day, jobs, chunksize=1))
    assert PrefixGuard(path).last("tenant-119") is not None
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("name", ["guard.json", "guard.db"])
def test_a_switch_of_model_or_api_is_reported(tmp_path: Path, name: str) -> None:
    """The same prompt sent to another model reads nothing of the old model's cache, yet the
    guard compared segments only and answered None: no reason for the hit rate's drop."""
    guard = PrefixGuard(tmp_path / name)
    guard.check(_body("Rules.", "q1"))
    opus = _body("Rules.", "q1") | {"model": "claude-opus-4-5"}
    d = guard.check(opus)
    assert d is not None
    assert (d.index, d.change, d.path) == (0, "changed", "model")
    assert d.describe() == "model changed: '\"claude-sonnet-4-5\"' -> '\"claude-opus-4-5\"'"
    assert guard.check(opus) is None  # the new model's prefix is stored now
    chat = {"model": "claude-opus-4-5", "messages": [{"role": "user", "content": "q1"}]}
    d = guard.check(chat, "openai_chat")
    assert d is not None and (d.path, d.before, d.after) == ("api", '"anthropic"', '"openai_chat"')
    bedrock = {
        "modelId": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "messages": [{"role": "user", "content": [{"text": "q1"}]}],
    }
    guard.check(bedrock, "bedrock_converse", key="b")
    nova = bedrock | {"modelId": "amazon.nova-pro-v1:0"}
    d = guard.check(nova, "bedrock_converse", key="b")
    assert d is not None and d.path == "modelId" and "nova" in d.after
    gemini = {"contents": [{"role": "user", "parts": [{"text": "q1"}]}]}  # model in the URL
    guard.check(gemini, "gemini", key="g")
    assert guard.check(gemini, "gemini", key="g") is None


@pytest.mark.parametrize("name", ["guard.json", "guard.db"])
def test_a_changed_thinking_or_tool_choice_is_reported_at_the_first_message(
    tmp_path: Path, name: str
) -> None:
    """Anthropic drops the cached messages when tool_choice or the thinking parameters change,
    but those sit outside every segment, so the guard saw the same prefix and answered None."""
    guard = PrefixGuard(tmp_path / name)
    body = _body("Rules.", "q1", breakpoint=False)  # no breakpoints: every segment is watched
    body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    guard.check(body)
    assert guard.check(copy.deepcopy(body)) is None  # the same settings
    more = copy.deepcopy(body) | {"thinking": {"type": "enabled", "budget_tokens": 4096}}
    d = guard.check(more)
    assert d is not None
    assert (d.index, d.segment_path, d.path) == (2, "messages[0]", "thinking")
    assert d.describe() == (
        'thinking changed: \'{"budget_tokens":1024,"type":"enabled"}\' -> '
        '\'{"budget_tokens":4096,"type":"enabled"}\''
    )
    forced = copy.deepcopy(more) | {"tool_choice": {"type": "any"}}
    d = guard.check(forced)
    assert d is not None and (d.path, d.before, d.after) == (
        "tool_choice",
        "(not set)",
        '{"type":"any"}',
    )
    # a change in the system comes first; history growing with a setting changed is reported
    longer = copy.deepcopy(forced)
    longer["messages"] += [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}]
    del longer["tool_choice"]
    d = guard.check(longer)
    assert d is not None and (d.path, d.after) == ("tool_choice", "(not set)")
    edited = copy.deepcopy(longer)
    edited["system"][1]["text"] = "Other rules."
    edited["thinking"] = {"type": "disabled"}
    d = guard.check(edited)
    assert d is not None and d.path == "system[1].text"
    # the tools and system stay cached: with breakpoints only there, nothing watched changed
    cached = PrefixGuard(tmp_path / f"sys-{name}")
    cached.check(_body("Rules.", "q1"))
    assert cached.check(_body("Rules.", "q1") | {"thinking": {"type": "disabled"}}) is None
