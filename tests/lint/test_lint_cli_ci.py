"""`promptcache lint` as a CI job meets it: SARIF paths from a sub-folder of a repository,
files named on the command line that are not Python, config mistakes that would check nothing
(quoted patterns, a sink with no argument), suppression comments in capitals, and one file
reached twice through a symbolic link. Each runs the real command on real files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from promptcache.cli import cli

BAD = (
    "import datetime\nimport anthropic\nclient = anthropic.Anthropic()\n"
    "def ask(q):\n"
    "    now = datetime.datetime.now()\n"
    "    return client.messages.create(model='m', system=f'Now {now}', messages=[q])\n"
)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["lint", "--no-cache", *args], catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_sarif_from_a_sub_folder_names_paths_from_the_repository_root(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub code scanning reads a relative URI from the repository's root: a run in
    backend/ must say backend/app.py, not app.py (which is no file of the repository)."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "backend").mkdir()
    (project / "backend" / "app.py").write_text(BAD)
    monkeypatch.chdir(project / "backend")
    result = run(".", "--format", "sarif")
    assert result.exit_code == 1, result.output
    sarif_run = json.loads(result.output)["runs"][0]
    assert sarif_run["originalUriBaseIds"] == {
        "%SRCROOT%": {"uri": project.resolve().as_uri() + "/"}
    }
    locations = [
        loc["physicalLocation"]["artifactLocation"]
        for item in sarif_run["results"]
        for loc in item["locations"]
    ]
    assert locations == [{"uri": "backend/app.py", "uriBaseId": "%SRCROOT%"}]
