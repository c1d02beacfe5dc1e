"""`promptcache lint` as a CI job meets it: SARIF and GitHub annotation paths from a
sub-folder of a repository, files named on the command line that are not Python, a quoted glob,
config mistakes that would check nothing (quoted patterns, a sink with no argument), suppression
comments in capitals, one file reached twice through a symbolic link, what the nothing-to-lint
warning counts and where the cache goes. Each runs the real command on real files."""

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


@pytest.mark.parametrize("pattern", ["'gen/*'", '"gen/"'])
def test_a_quoted_exclude_pattern_is_an_error_not_a_pattern_that_matches_nothing(
    project: Path, pattern: str
) -> None:
    (project / "gen").mkdir()
    (project / "gen" / "made.py").write_text(BAD)
    (project / "pyproject.toml").write_text(
        f"[tool.promptcache.lint]\nexclude = [{json.dumps(pattern)}]\n"
    )
    result = run(".")
    assert result.exit_code == 2, result.output
    assert f"bad pattern {pattern!r} in exclude: it is wrapped in quotes" in result.output
    assert f"write {pattern[1:-1]!r}" in result.output
    # as the error says: without the quotes it leaves gen/ out
    (project / "pyproject.toml").write_text(
        f"[tool.promptcache.lint]\nexclude = [{json.dumps(pattern[1:-1])}]\n"
    )
    assert run(".").exit_code == 0


def test_a_quoted_per_file_ignores_pattern_is_an_error(project: Path) -> None:
    (project / "app.py").write_text(BAD)
    (project / "pyproject.toml").write_text(
        '[tool.promptcache.lint.per-file-ignores]\n"\'app.py\'" = ["PC001"]\n'
    )
    result = run(".")
    assert result.exit_code == 2 and "in per-file-ignores: it is wrapped in quotes" in result.output


SINK_CALLER = (
    "from datetime import datetime\nfrom myapp import llm\n"
    "def go(q):\n"
    "    return llm.ask(q, system_prompt=f'now {datetime.now()}')\n"
)


@pytest.mark.parametrize("roles", ["", "system = []\n", 'model = "model"\n'])
def test_a_sink_entry_that_names_no_argument_is_an_error(project: Path, roles: str) -> None:
    """A [[sinks]] entry with only call (or empty lists) checks nothing: it must not pass as
    'All checks passed'."""
    (project / "myapp").mkdir()
    (project / "myapp" / "llm.py").write_text(
        "def ask(prompt, system_prompt=None):\n    return 1\n"
    )
    (project / "app.py").write_text(SINK_CALLER)
    (project / "pyproject.toml").write_text(
        f'[[tool.promptcache.lint.sinks]]\ncall = "myapp.llm.ask"\n{roles}'
    )
    result = run(".")
    assert result.exit_code == 2, result.output
    assert "sinks entry 'myapp.llm.ask' names no argument to check" in result.output
    assert "Traceback" not in result.output
    # with the argument named, as the error says, the time is found
    (project / "pyproject.toml").write_text(
        '[[tool.promptcache.lint.sinks]]\ncall = "myapp.llm.ask"\nsystem = "system_prompt"\n'
    )
    assert run(".").exit_code == 1


@pytest.mark.parametrize(
    "comment",
    [
        "# PROMPTCACHE: IGNORE[PC001]",
        "# promptcache: IGNORE[pc001]",
        "# Promptcache: Ignore-File[PC001]",
    ],
)
def test_a_suppression_comment_in_capitals_suppresses(project: Path, comment: str) -> None:
    """As ruff's # NOQA: case does not matter, rather than a comment that silently does nothing."""
    (project / "app.py").write_text(BAD.replace("messages=[q])\n", f"messages=[q])  {comment}\n"))
    result = run("app.py")
    assert result.exit_code == 0, result.output
    assert "All checks passed" in result.output


def test_a_suppression_comment_in_capitals_is_checked(project: Path) -> None:
    (project / "app.py").write_text(
        BAD.replace("messages=[q])\n", "messages=[q])  # PROMPTCACHE: IGNORE[PC01]\n")
    )
    result = run("app.py")
    assert result.exit_code == 2
    assert "unknown rule id(s) PC01 in `PROMPTCACHE: IGNORE[PC01]`" in result.output


def test_named_files_that_are_not_python_are_skipped_and_said_to_be(project: Path) -> None:
    """`promptcache lint $(git ls-files)` names data.json and README.md too: a JSON object
    parses as a Python dict (it said 'All checks passed (1 file)' of data.json) and a README
    gave a PC000 line. Only Python source is linted; the rest is named on stderr."""
    (project / "data.json").write_text('{"system": "Be brief.", "tools": []}\n')
    (project / "README.md").write_text("# App\n\nRun `python app.py`.\n")
    (project / "Makefile").write_text("all:\n\techo hi\n")
    (project / "APP.PY").write_text(BAD)  # an extension in capitals is still Python
    (project / "tool").write_text("#!/usr/bin/env python3\n" + BAD)  # a script, as pre-commit
    result = run("data.json", "README.md", "Makefile", "APP.PY", "tool")
    assert result.exit_code == 1, result.output
    assert result.stderr == (
        "warning: skipped 3 named files that are not Python source (data.json, README.md, "
        "Makefile): a named file is linted when it ends in .py, .pyi or .pyw, or has no "
        "extension and a #! line naming python\n"
    )
    assert "APP.PY:6:" in result.stdout and "tool:7:" in result.stdout
    assert "Found 2 findings in 2 files of 2 checked" in result.stdout
    assert "PC000" not in result.stdout and "data.json" not in result.stdout
    alone = run("data.json")
    assert alone.exit_code == 0
    assert "All checks passed (1 file)" not in alone.stdout
    assert "skipped 1 named file that is not Python source (data.json)" in alone.stderr


FIXABLE = (
    "import json\nimport anthropic\nclient = anthropic.Anthropic()\n"
    "def ask(q, fields):\n"
    "    profile = {k: fields[k] for k in set(fields)}  # keys in a set's order\n"
    "    return client.messages.create(model='m', system=json.dumps(profile), messages=[q])\n"
)


@pytest.mark.parametrize(
    "names", [(".",), ("pkg", "sub"), ("sub/link.py", "pkg/app.py"), ("pkg", "pkg/app.py")]
)
def test_a_file_reached_twice_through_a_link_is_reported_once(
    project: Path, names: tuple[str, ...]
) -> None:
    (project / "pkg").mkdir()
    (project / "sub").mkdir()
    (project / "pkg" / "app.py").write_text(BAD)
    (project / "sub" / "link.py").symlink_to(Path("..") / "pkg" / "app.py")
    result = run(*names, "--format", "json")
    assert result.exit_code == 1, result.output
    paths = [finding["filename"] for finding in json.loads(result.stdout)]
    assert paths == ["pkg/app.py"]  # under its own name, not the link's


def test_a_file_reached_twice_is_patched_once_by_diff(project: Path) -> None:
    """Two copies of one patch: `git apply` fails on the second."""
    (project / "pkg").mkdir()
    (project / "pkg" / "app.py").write_text(FIXABLE)
    (project / "link.py").symlink_to(Path("pkg") / "app.py")
    result = run(".", "--diff")
    assert result.exit_code == 1
    assert result.stdout.count("+++ ") == 1 and "+++ b/pkg/app.py" in result.stdout
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    patch = project / "fix.patch"
    patch.write_text(result.stdout)
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=project, check=True)


def test_github_annotations_from_a_sub_folder_name_paths_from_the_repository_root(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub places an annotation's file= from the repository's root: file=app.py from a run
    in backend/ would point at no file of the pull request."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "backend").mkdir()
    (project / "backend" / "app.py").write_text(BAD)
    monkeypatch.chdir(project / "backend")
    result = run(".", "--format", "github")
    assert result.exit_code == 1
    assert result.stdout.startswith("::error file=backend/app.py,line=6,")
    # without a repository around it, the current folder is the root
    monkeypatch.chdir(project)
    (project / ".git").rename(project / "git-was-here")
    monkeypatch.chdir(project / "backend")
    assert run(".", "--format", "github").stdout.startswith("::error file=app.py,line=6,")


def test_a_quoted_glob_on_the_command_line_is_said_to_be_unexpanded(project: Path) -> None:
    """`promptcache lint "src/**/*.py"` in a CI step: the shell leaves the quoted glob as it
    is, and 'does not exist' alone hides why."""
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text(BAD)
    result = run("src/**/*.py")
    assert result.exit_code == 2
    assert (
        "Path 'src/**/*.py' does not exist (a glob pattern is not expanded here: name the "
        "folder, which is searched for .py files, or let the shell expand it unquoted)"
    ) in " ".join(result.output.split())
    assert "Traceback" not in result.output
    dash = run("-")
    assert dash.exit_code == 2
    assert "(source is not read from stdin: name files or folders)" in dash.output


def test_nothing_to_lint_counts_the_files_the_config_excludes(project: Path) -> None:
    """With every file excluded by the config, the warning counts the files the exclude left
    out, rather than saying 'No Python files found' of a folder that holds some."""
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nexclude = ["src/gen/"]\n')
    (project / "src" / "gen").mkdir(parents=True)
    (project / "src" / "gen" / "a.py").write_text(BAD)
    (project / "src" / "gen" / "b.py").write_text(BAD)
    (project / "tests").mkdir()
    (project / "tests" / "test_a.py").write_text(BAD)
    result = run(".")
    assert result.exit_code == 0 and result.stdout == "All checks passed (0 files).\n"
    assert result.stderr == (
        "warning: No Python files to lint under the given path(s): 1 test file left out "
        "(--include-tests lints them); 2 files left out by the config's exclude\n"
    )


def test_the_cache_folder_is_where_the_help_says(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The help said 'beside pyproject.toml'; a pyproject.toml without a lint table is not
    the settings' one, and the cache goes to the current folder."""
    (project / "pyproject.toml").write_text('[project]\nname = "app"\n')
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text(BAD)
    monkeypatch.chdir(project / "src")
    assert CliRunner().invoke(cli, ["lint", "."]).exit_code == 1
    assert (project / "src" / ".promptcache_cache").is_dir()
    assert not (project / ".promptcache_cache").exists()
    helptext = " ".join(CliRunner().invoke(cli, ["lint", "--help"]).output.split())
    assert (
        "default: .promptcache_cache beside the pyproject.toml the settings come from, else in "
        "the current folder" in helptext
    )
    # with a lint table, the cache goes beside it
    (project / "pyproject.toml").write_text('[project]\nname = "app"\n[tool.promptcache.lint]\n')
    assert CliRunner().invoke(cli, ["lint", "."]).exit_code == 1
    assert (project / ".promptcache_cache").is_dir()


def test_nothing_to_lint_counts_the_files_gitignore_leaves_out(project: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".gitignore").write_text("gen/\n")
    (project / "gen").mkdir()
    (project / "gen" / "made.py").write_text(BAD)
    result = run(".")
    assert result.exit_code == 0
    assert result.stderr == (
        "warning: No Python files to lint under the given path(s): 1 file left out by "
        ".gitignore (respect-gitignore = false in the config lints them)\n"
    )
    # as it says
    (project / "pyproject.toml").write_text("[tool.promptcache.lint]\nrespect-gitignore = false\n")
    assert run(".").exit_code == 1


def test_a_gitignore_line_pathspec_cannot_compile_matches_nothing_as_in_git(project: Path) -> None:
    """A .gitignore copied from a real project holds a file name with a reversed range,
    ``[AVC-8bit 1080p]`` (``C`` after ``8``): the lint goes on (no traceback), the other lines
    still leave their files out, and the file that line names is linted, as git itself lists it
    as not ignored."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    odd = "clip [AVC-8bit 1080p].py"
    (project / ".gitignore").write_text(f"gen/\n{odd}\n*.py[cod]\n")
    (project / "gen").mkdir()
    (project / "gen" / "made.py").write_text(BAD)
    (project / odd).write_text(BAD)
    ignored = subprocess.run(
        ["git", "-C", str(project), "check-ignore", "--no-index", odd, "gen/made.py"],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert ignored == ["gen/made.py"]
    result = run(".", "--format", "json")
    assert result.exit_code == 1
    files = {f["filename"] for f in json.loads(result.stdout)}
    assert files == {odd}
