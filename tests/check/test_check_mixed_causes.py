"""A request whose tool list is reordered by the hash seed while a later system message also
changes (a random draw) is read as the reordering it is, in one perturbed run with every kind
changed: real child processes through the official openai client (programs/mixed_breakers.py)."""

from __future__ import annotations

from pathlib import Path

from check_support import by_function, check_program


def test_a_reordered_tool_list_beside_a_random_change_is_the_hash_seed(tmp_path: Path) -> None:
    result, _ = check_program(tmp_path, "mixed_breakers.py")
    found = {}
    for finding in by_function(result)["ask"]:
        assert finding.site is not None and finding.site.callers
        found[finding.site.callers[0][2]] = (finding.rule, finding.path, finding.causes)
    assert len(by_function(result)["ask"]) == 2
    assert found == {
        # the first difference is the tools' order; the whole request's segments are not the
        # same multiset (the system message changed too), yet the tool list alone is
        "set_tools_and_random_system": ("PC005", "tools[0].function.name", ("hash_seed",)),
        # the look-alike: the same tools sorted, so only the random draw differs
        "sorted_tools_and_random_system": ("PC002", "messages[0].content", ("random",)),
    }
    [reordered] = [f for f in result.findings if f.rule == "PC005"]
    assert "the tool list is in another order" in reordered.message


def test_a_set_s_order_beside_a_time_in_one_message_is_found_too(tmp_path: Path) -> None:
    # one system message holds the time and then names from a set: the time was PC001, and the
    # reordered names, not the same words as the whole message, were PC002 "caused by random"
    # (merged into the PC002 of an id when the message held one too: examples/lint_app)
    result, _ = check_program(tmp_path, "mixed_breakers.py")
    found: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for finding in by_function(result)["tell"]:
        assert finding.site is not None and finding.site.callers
        found.setdefault(finding.site.callers[0][2], []).append((finding.rule, finding.causes))
    assert {k: sorted(v) for k, v in found.items()} == {
        "time_and_set_in_system": [("PC001", ("clock",)), ("PC004", ("hash_seed",))],
        # the look-alike: the names sorted, only the time differs
        "time_and_sorted_set_in_system": [("PC001", ("clock",))],
    }
    [order] = [f for f in result.findings if f.rule == "PC004"]
    assert "messages[0].content is in another order" in order.message
