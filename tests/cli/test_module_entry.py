"""``python -m promptcache`` runs the same CLI as the ``promptcache`` script, named the same."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from promptcache import __version__


def test_module_runs_the_cli_under_the_scripts_name() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "promptcache", "--version"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"promptcache, version {__version__}"


def test_module_lints_like_the_script(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(
        "import datetime\n"
        "import anthropic\n"
        "client = anthropic.Anthropic()\n"
        "def ask(q):\n"
        "    now = datetime.datetime.now().isoformat()\n"
        "    return client.messages.create(model='claude-sonnet-4-5', max_tokens=64,\n"
        "        system=f'Time: {now}', messages=[{'role': 'user', 'content': q}])\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "promptcache", "lint", ".", "--no-cache"],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "agent.py:5" in done.stdout and "PC001" in done.stdout
    assert "Usage: promptcache" in subprocess.run(
        [sys.executable, "-m", "promptcache", "lint", "--bogus"],
        capture_output=True, text=True, timeout=120, check=False,
    ).stderr
