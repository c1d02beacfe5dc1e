"""Conversation: turn/token tracking, compaction thresholds, commit-and-clear."""

from __future__ import annotations

import pytest

from promptcache.conversation import Conversation
from promptcache.errors import ConfigError
from promptcache.fingerprint import first_divergence
from promptcache.prompt import PromptBuilder
from promptcache.tokens import count_tokens


def _base() -> PromptBuilder:
    b = PromptBuilder("claude-sonnet-4-5", min_prefix_tokens=1)
    return b.system("You are a reviewer.").session("User: Ada.")


def test_tracks_turns_and_tokens_and_leaves_base_alone() -> None:
    base = _base()
    conv = Conversation(base)
    conv.add_user("Is this loop fine?").add_assistant("Use a comprehension.")
    assert conv.num_turns == 2
    assert conv.history_tokens == count_tokens("Is this loop fine?") + count_tokens(
        "Use a comprehension."
    )
    assert base.history == ()


def test_messages_added_through_the_prompt_count_toward_compaction() -> None:
    """conv.prompt is the builder the docs render from; messages added with
    conv.prompt.add_user() counted in num_turns but not in history_tokens, so a conversation
    past max_history_tokens never asked to be compacted."""
    conv = Conversation(_base(), max_history_tokens=20)
    conv.prompt.add_user("word " * 19)
    assert conv.history_tokens == count_tokens("word " * 19)
    assert not conv.should_compact()
    conv.prompt.add_assistant("two more")
    conv.add_user("and one")  # the two ways mix
    assert conv.history_tokens == sum(count_tokens(t.text) for t in conv.history)
    assert conv.should_compact()


def test_should_compact_past_turn_threshold() -> None:
    conv = Conversation(_base(), max_turns=4)
    for i in range(2):
        conv.add_user(f"q{i}").add_assistant(f"a{i}")
    assert conv.num_turns == 4 and not conv.should_compact()
    conv.add_user("q2")
    assert conv.should_compact()


def test_should_compact_past_token_threshold() -> None:
    conv = Conversation(_base(), max_history_tokens=20)
    conv.add_user("word " * 19)
    assert not conv.should_compact()
    conv.add_assistant("two more")
    assert conv.should_compact()


def test_default_thresholds() -> None:
    conv = Conversation(_base())
    assert (conv.max_turns, conv.max_history_tokens) == (50, 30_000)
    for i in range(25):
        conv.add_user(f"q{i}").add_assistant(f"a{i}")
    assert not conv.should_compact()
    conv.add_user("one more")
    assert conv.should_compact()


def test_compact_commits_summary_and_clears_history() -> None:
    conv = Conversation(_base(), max_turns=3)
    conv.add_user("q").add_assistant("a")
    conv.prompt.dynamic("current question")
    fresh = conv.compact("Ada asked about loops; we agreed on comprehensions.")
    assert fresh.history == () and fresh.num_turns == 0 and fresh.history_tokens == 0
    assert fresh.max_turns == 3
    assert fresh.prompt.session_blocks == (
        "User: Ada.",
        "## Summary of the conversation so far\n\nAda asked about loops; we agreed on "
        "comprehensions.",
    )
    assert fresh.prompt.dynamic_blocks == ()
    assert conv.num_turns == 2  # the old conversation is unchanged
    # a second compaction replaces the summary instead of stacking them
    again = fresh.add_user("q2").compact("New summary.")
    assert again.prompt.session_blocks[-1].endswith("New summary.")
    assert len(again.prompt.session_blocks) == 2
    # the frozen prefix is byte-identical across compactions: its cache keeps hitting
    before = conv.prompt.fork()
    after = again.prompt.fork().dynamic("q")
    before.clear_dynamic().dynamic("q")
    old_fp, new_fp = before.fingerprint(), after.fingerprint()
    assert old_fp.segments[:2] == new_fp.segments[:2]  # frozen + original session block
    divergence = first_divergence(old_fp, new_fp)
    assert divergence is not None and (divergence.index, divergence.segment_path) == (
        2,
        "system[2]",
    )


@pytest.mark.parametrize(
    "kwargs", [{"max_turns": 0}, {"max_history_tokens": -1}, {"max_turns": True}]
)
def test_bad_thresholds(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigError, match=r"must be a positive int"):
        Conversation(_base(), **kwargs)


def test_empty_summary_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"needs a non-empty summary"):
        Conversation(_base()).compact("  ")


def test_compact_keeps_what_was_added_through_the_prompt() -> None:
    """compact() rebuilt the conversation from the base given to Conversation(), so a document
    added with conv.prompt.knowledge() while the frozen layer was open, or a session block added
    with conv.prompt.session(), was gone after compact: the frozen prefix changed (its cache
    missed) and the session fact was lost. Both stay; the summary alone is replaced, last."""
    base = PromptBuilder("claude-sonnet-4-5", min_prefix_tokens=1).system("You are a reviewer.")
    conv = Conversation(base)
    conv.prompt.knowledge("Use ruff.", title="house rules")
    conv.prompt.session("User: Ada.")
    conv.add_user("q").add_assistant("a")
    fresh = conv.compact("First summary.")
    assert fresh.prompt.frozen_blocks == conv.prompt.frozen_blocks
    assert fresh.prompt.session_blocks == (
        "User: Ada.",
        "## Summary of the conversation so far\n\nFirst summary.",
    )
    fresh.prompt.session("Ada prefers short answers.")
    again = fresh.add_user("q2").compact("Second summary.")
    assert again.prompt.session_blocks == (
        "User: Ada.",
        "Ada prefers short answers.",
        "## Summary of the conversation so far\n\nSecond summary.",
    )
    before = conv.prompt.fork(history=False).dynamic("q").fingerprint()
    after = again.prompt.fork().dynamic("q").fingerprint()
    assert before.segments[:3] == after.segments[:3]  # tools none; both frozen blocks, session
    assert base.frozen_blocks == ("You are a reviewer.",)  # the base is never modified
