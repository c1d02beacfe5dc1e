"""A command's main value typed as a bare argument: the error names the option it belongs to.

``promptcache report chat.db`` was ``Got unexpected extra argument (chat.db)`` and
``promptcache engine serve ./model`` was ``Missing option '--model'``: neither said that the
value is given with an option. The real ``promptcache`` executable, run as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROMPTCACHE = str(Path(sys.executable).parent / "promptcache")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PROMPTCACHE, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("report", "chat.db"), "--db"),
        (("report", "--since", "1h", "chat.db"), "--db"),
        (("proxy", "openai"), "--upstream"),
        (("proxy", "http://127.0.0.1:8000"), "--upstream"),
        (("engine", "serve", "model"), "--model"),
        (("engine", "kv-size", "model/config.json"), "--model"),
    ],
)
def test_the_value_of_an_option_given_bare_names_the_option(
    tmp_path: Path, args: tuple[str, ...], option: str
) -> None:
    (tmp_path / "chat.db").write_bytes(b"")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    done = run(*args, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    command = " ".join(args[: 2 if args[0] == "engine" else 1])
    value = args[-1]
    assert done.stderr.endswith(
        f"Error: `promptcache {command}` takes no bare arguments: give {value!r} as "
        f"`{option} {value}`\n"
    ), done.stderr
    assert "Traceback" not in done.stderr


def test_other_stray_arguments_keep_the_usual_errors(tmp_path: Path) -> None:
    # a value split from its option ("1 h") is not a log: no --db hint
    done = run("report", "--since", "1", "h", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.endswith("Error: Got unexpected extra argument (h)\n"), done.stderr
    done = run("engine", "kv-size", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.endswith("Error: Missing option '--model'.\n"), done.stderr
    done = run("report", "--nope", "chat.db", cwd=tmp_path)  # an unknown option stays one
    assert done.returncode == 2
    assert "No such option: --nope" in done.stderr or "No such option '--nope'" in done.stderr
