"""The CLI's contract: fast --help that imports nothing heavy, help on every subcommand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache import __version__
from promptcache.cli import COMMANDS, cli

HEAVY = ["torch", "triton", "starlette", "uvicorn", "transformers", "libcst", "anthropic", "openai"]


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys, json\n"
        "from promptcache.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"`promptcache --help` imported heavy modules: {loaded}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_has_help(name: str) -> None:
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    command = cli.get_command(None, name)  # type: ignore[arg-type]
    assert command is not None and command.help, f"{name} has no help text"


def test_unknown_command_is_rejected() -> None:
    result = CliRunner().invoke(cli, ["no-such-command"])
    assert result.exit_code == 2
    assert "No such command" in result.output


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("serve", "engine serve"),
        ("kv-size", "engine kv-size"),
        ("reprot", "report"),
        ("copy", "log copy"),
    ],
)
def test_an_unknown_command_names_the_command_meant_also_inside_a_group(
    typed: str, meant: str
) -> None:
    # `promptcache serve` is what a reader of "engine serve" types first
    result = CliRunner().invoke(cli, [typed])
    assert result.exit_code == 2
    assert f"Error: No such command '{typed}'. Did you mean '{meant}'?" in result.output
    result = CliRunner().invoke(cli, ["xyzzy"])
    assert result.exit_code == 2 and "Error: No such command 'xyzzy'.\n" in result.output


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["rules"],
        ["lint", "app.py"],
        ["hash", "body.json"],
        ["cost", "usage.json", "-m", "gpt-4o"],
    ],
)
def test_a_full_disk_under_stdout_is_one_line_and_status_2(tmp_path: Path, args: list[str]) -> None:
    """`promptcache lint . > report.txt` on a full disk printed a 30-line OSError traceback
    (and `--help` too); it is one line naming standard output, with nothing after it."""
    (tmp_path / "app.py").write_text("import datetime\n" * 2000)
    (tmp_path / "body.json").write_text(
        '{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    )
    (tmp_path / "usage.json").write_text('{"prompt_tokens": 10, "completion_tokens": 1}')
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-c", "from promptcache.cli import main; main()", *args],
            cwd=tmp_path,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "error: cannot write the output (standard output): No space left on device\n"
    )
