"""A command whose extra is not installed says which extra to install, in one line (exit 2).

Each case runs the CLI in a fresh interpreter whose import system refuses the extra's libraries
(a meta path finder placed first), as a core-only install would.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from promptcache.cli import COMMAND_EXTRAS, EXTRA_MODULES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]

_RUN_WITHOUT = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Missing())
for name in list(sys.modules):
    if name.partition(".")[0] in BLOCKED:
        del sys.modules[name]
from promptcache.cli import main
main(sys.argv[2:])
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_without(
    blocked: list[str], args: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _RUN_WITHOUT, ",".join(blocked), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("blocked", "args", "extra"),
    [
        (["starlette", "uvicorn"], ["proxy", "--upstream", "openai", "--no-log"], "proxy"),
        (["prometheus_client", "jinja2"], ["report", "--db", "log.db"], "proxy"),
        (["jinja2"], ["report", "--db", "log.db", "--format", "html"], "proxy"),
        (["torch"], ["engine", "serve", "--model", "some/model"], "engine"),
        (["starlette", "uvicorn"], ["engine", "serve", "--model", "some/model"], "engine"),
    ],
)
def test_a_missing_extra_is_one_line(
    tmp_path: Path, blocked: list[str], args: list[str], extra: str
) -> None:
    if args[0] == "proxy" or args[:2] == ["engine", "serve"]:
        args = [*args, "--port", str(_free_port())]
    result = _run_without(blocked, args, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"install promptcache[{extra}]" in lines[0]
    assert f"pip install '.[{extra}]'" in lines[0]
    assert re.search(r"needs (" + "|".join(blocked) + r"),", lines[0])


def test_a_missing_core_module_keeps_its_traceback(tmp_path: Path) -> None:
    """Only the extras' libraries are explained away; anything else is a bug to be seen."""
    result = _run_without(["sqlite_utils"], ["report", "--db", "log.db"], tmp_path)
    assert result.returncode == 1
    assert "ModuleNotFoundError: No module named 'sqlite_utils'" in result.stderr


def test_commands_without_an_extra_still_work_without_the_extras(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\n")
    result = _run_without(sorted(EXTRA_MODULES), ["lint", "app.py"], tmp_path)
    assert result.returncode == 0, result.stderr


#: Distributions whose import name differs from the distribution name.
IMPORT_NAMES = {
    "pyzmq": "zmq",
    "opentelemetry_sdk": "opentelemetry",
    "opentelemetry_exporter_otlp_proto_http": "opentelemetry",
    "opentelemetry_proto": "opentelemetry",
}


def test_extra_modules_cover_every_optional_dependency() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = pyproject["project"]["optional-dependencies"]
    names = set()
    for requirements in extras.values():
        for requirement in requirements:
            name = re.match(r"[A-Za-z0-9_.-]+", requirement)
            assert name is not None
            if not name.group().startswith("promptcache"):
                dist = name.group().lower().replace("-", "_")
                names.add(IMPORT_NAMES.get(dist, dist))
    core = {"pytest", "pytest_timeout", "hypothesis", "transformers", "jsonschema", "ruff"}
    core |= {"mypy", "build", "accelerate"}  # dev tools (accelerate: transformers' GGUF load)
    assert names - core <= EXTRA_MODULES
    assert set(COMMAND_EXTRAS.values()) <= set(extras)
