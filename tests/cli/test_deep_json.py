"""`promptcache hash` / `cost` on absurdly nested JSON: a clean error, never a RecursionError."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import cli


@pytest.mark.parametrize("depth", [600, 5000])
@pytest.mark.parametrize("command", ["hash", "cost"])
def test_deeply_nested_input_is_a_clean_error(tmp_path: Path, command: str, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    if command == "hash":
        text = '{"messages": [{"role": "user", "content": ' + nested + "}]}"
        args = ["hash"]
    else:
        text = '{"usage": {"prompt_tokens": 1, "completion_tokens": 1, "x": ' + nested + "}}"
        args = ["cost", "--model", "gpt-4o"]
    path = tmp_path / "deep.json"
    path.write_text(text)
    result = CliRunner().invoke(cli, [*args, str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    assert "nested" in result.output
