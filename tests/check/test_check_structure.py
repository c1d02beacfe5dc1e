"""Structure checks on the requests a program really sends (programs/structure.py, raw httpx
posts to Anthropic's host, rerouted by the hook)."""

from __future__ import annotations

from pathlib import Path

from check_support import by_function, check_program


def test_ttl_order_minimum_and_lookback(tmp_path: Path) -> None:
    result, _ = check_program(tmp_path, "structure.py")
    found = {
        name: [(f.rule, f.check, f.path) for f in fs] for name, fs in by_function(result).items()
    }
    assert found == {
        "ttl_order": [("PC014", "structure", "system[1]")],
        "below_minimum": [("PC008", "structure", "system[0]")],
        "lookback": [("PC018", "structure", "messages[26].content[0]")],
    }  # lookback_ok appends 10 messages: within the 20 positions a breakpoint looks back
    [lookback] = by_function(result)["lookback"]
    assert lookback.message.startswith("26 block positions appended after the previous request")
    [short] = by_function(result)["below_minimum"]
    assert "minimum of 1024" in short.message  # claude-sonnet-4-5, promptcache.minimums
    assert "about 3 tokens" in short.message  # "Be brief." is "Be", " brief", "." in cl100k
    assert [sum(1 for q in r.requests if q.api) for r in result.runs] == [6, 6]


def test_a_key_that_changes_while_the_prompt_continues_is_found_at_its_call_site(
    tmp_path: Path,
) -> None:
    # PC013's key-change check compares the requests of one call site only: summarise carries
    # history_key's whole prompt under another key, from another call site, and is no finding
    result, _ = check_program(tmp_path, "key_change.py")
    [finding] = result.findings
    assert finding.site is not None
    assert (finding.rule, finding.check, finding.site.function) == (
        "PC013",
        "structure",
        "history_key",
    )
    assert (finding.path, finding.requests, finding.seen_in) == ("prompt_cache_key", 2, (0,))
    assert finding.message.startswith("prompt_cache_key changes from '")
    assert finding.message.endswith(
        "while the prompt continues an earlier request's: the continuation is routed away from "
        "the cached prefix"
    )
    # 3 + 1 + 3 + 3 requests in each run, all captured
    assert [sum(1 for q in r.requests if q.api) for r in result.runs] == [10, 10]
    assert result.exit_code == 1
