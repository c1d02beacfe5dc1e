"""`promptcache hash` / `cost` on files that are not plain UTF-8: clean errors, BOM accepted.

Editors on Windows save JSON with a UTF-8 byte-order mark, and PowerShell's `>` writes UTF-16;
neither may end in a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import cli

USAGE = {"prompt_tokens": 2006, "completion_tokens": 300}
REQUEST = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
ARGS = {"cost": ["--model", "gpt-4o"], "hash": []}
BODIES = {"cost": USAGE, "hash": REQUEST}


@pytest.mark.parametrize("command", ["cost", "hash"])
def test_utf16_file_is_a_clean_error(tmp_path: Path, command: str) -> None:
    path = tmp_path / "body.json"
    path.write_bytes(json.dumps(BODIES[command]).encode("utf-16"))
    result = CliRunner().invoke(cli, [command, str(path), *ARGS[command]])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 2
    assert "not UTF-8" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["cost", "hash"])
def test_utf8_bom_is_accepted(tmp_path: Path, command: str) -> None:
    path = tmp_path / "body.json"
    path.write_bytes(json.dumps(BODIES[command]).encode("utf-8-sig"))
    result = CliRunner().invoke(cli, [command, str(path), *ARGS[command]])
    assert result.exit_code == 0, result.output
    # Read as the same JSON: the output is that of the file without the BOM.
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(BODIES[command]), encoding="utf-8")
    expected = CliRunner().invoke(cli, [command, str(plain), *ARGS[command]])
    assert expected.exit_code == 0, expected.output
    assert result.output == expected.output.replace(str(plain), str(path))
    if command == "cost":
        assert "2,006" in result.output  # the prompt_tokens of USAGE, read through the BOM


def test_stdin_invalid_utf8_is_a_clean_error() -> None:
    result = CliRunner().invoke(cli, ["cost", "-", "-m", "gpt-4o"], input=b"\xff{}")
    assert result.exit_code == 2
    assert "not UTF-8" in result.output
