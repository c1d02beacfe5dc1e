"""The CLI's contract: fast --help that imports nothing heavy, help on every subcommand."""

from __future__ import annotations

import json
import subprocess
import sys

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
