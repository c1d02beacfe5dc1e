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
