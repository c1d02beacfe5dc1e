"""What a run lints by default, and what it says about the rest.

Templates of Python files (``{{ ... }}``) are skipped with one line; a file that does not parse
is one PC000 info line; test folders and test files are left out unless ``--include-tests``;
an unproven flow is no finding and shows only with ``--explain``. Each case has its look-alike
beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from promptcache.cli import cli

SUBDAY = (
    "import anthropic\nimport time\nclient = anthropic.Anthropic()\n"
    "def ask(q):\n"
    "    return client.messages.create(\n"
    "        model='m', max_tokens=1, system=f'At {time.time()}', messages=[q])\n"
)
THROUGH_UNSEEN_CALL = (
    "import anthropic\nimport time\nfrom jinja_like import fill\n"
    "client = anthropic.Anthropic()\n"
    "def ask(q):\n"
    "    return client.messages.create(\n"
    "        model='m', max_tokens=1, system=fill('At', time.time()), messages=[q])\n"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.promptcache.lint]\n")
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["lint", "--no-cache", *args], catch_exceptions=False)


def test_templates_are_skipped_in_one_line_and_syntax_errors_are_info(project: Path) -> None:
    src = project / "src"
    src.mkdir()
    (src / "app.py").write_text("from {{ folder_name }} import app\n")
    (src / "setup_hooks.py").write_text("X = '{{ cookiecutter.name }}'\nif {{ flag }}:\n")
    (src / "broken.py").write_text("def ask(:\n    pass\n")
    # an f-string's `{{` does not make a file with a real syntax error a template
    (src / "escaped.py").write_text('GREETING = f"{{literal}}"\ndef ask(:\n    pass\n')
    result = run("src")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("skipped 2 template files") == 1
    assert "app.py" not in result.stdout and "setup_hooks.py" not in result.stdout
    # the look-alikes: a file that does not parse for another reason is one info line each
    assert result.stdout.count("PC000") == 2
    assert "broken.py:1:" in result.stdout and "escaped.py:2:" in result.stdout
    summary = "Found 2 findings in 2 files of 2 checked (0 errors, 0 warnings, 2 info)."
    assert summary in result.stdout
    assert run("src", "--fail-on", "info").exit_code == 1
    (src / "app.py").write_text("from app import run\n")
    (src / "setup_hooks.py").write_text("X = 1\n")
    assert "skipped" not in run("src").stderr


def test_test_files_are_left_out_unless_asked(project: Path) -> None:
    src = project / "src"
    (src / "tests").mkdir(parents=True)
    (src / "app.py").write_text(SUBDAY)
    for name in ("tests/helpers.py", "test_app.py", "app_test.py", "conftest.py"):
        (src / name).write_text(SUBDAY)
    default = run("src")
    assert default.stdout.count("PC001") == 1 and "src/app.py:6:" in default.stdout
    assert "Found 1 finding in 1 file of 1 checked " in default.stdout
    everything = run("src", "--include-tests")
    assert everything.stdout.count("PC001") == 5
    assert "Found 5 findings in 5 files of 5 checked " in everything.stdout
    # a test file named on the command line is linted
    named = run("src/test_app.py")
    assert named.stdout.count("PC001") == 1
    # a test folder named on the command line is linted
    assert run("src/tests").stdout.count("PC001") == 1


def test_a_test_folder_named_is_linted_with_its_test_files(project: Path) -> None:
    # `promptcache lint tests` lints the test files in it (the docs: a test folder named on the
    # command line is linted); they are still left out of a folder that only holds it
    tests = project / "src" / "tests"
    (tests / "unit").mkdir(parents=True)
    for name in ("test_app.py", "unit/test_more.py", "conftest.py"):
        (tests / name).write_text(SUBDAY)
    named = run("src/tests")
    assert named.stdout.count("PC001") == 3 and "in 3 files of 3 checked" in named.stdout
    assert "No Python files" not in named.stderr
    around = run("src")
    assert around.exit_code == 0 and "All checks passed (0 files)" in around.stdout
    # and the warning says the files were left out as tests, not that there are none
    assert "3 test files left out (--include-tests lints them)" in around.stderr
    assert "No Python files found" not in around.stderr
    (project / "docs").mkdir()
    assert "No Python files found under the given path(s)" in run("docs").stderr


def test_unproven_flows_are_no_findings_and_show_with_explain(project: Path) -> None:
    (project / "unseen.py").write_text(THROUGH_UNSEEN_CALL)
    (project / "seen.py").write_text(SUBDAY)
    quiet = run("unseen.py")
    assert quiet.exit_code == 0 and "PC001" not in quiet.output
    explained = run("unseen.py", "--explain")
    assert explained.exit_code == 0
    assert "All checks passed (1 file)." in explained.stdout
    lines = explained.stderr.splitlines()
    assert lines[0].startswith("explain: 1 unproven flow ")
    assert "unseen.py:7:" in lines[1] and "PC001" in lines[1]
    assert "assumed to pass through fill() at unseen.py:7" in lines[1]
    # the look-alike: the same time value with a complete chain is an error finding
    seen = run("seen.py", "--explain")
    assert seen.exit_code == 1 and "seen.py:6:" in seen.stdout and "PC001" in seen.stdout
    assert seen.stderr.splitlines() == ["explain: 0 unproven flows"]


THROUGH_A_DICT_OF_FUNCTIONS = (
    "import anthropic\nimport time\nclient = anthropic.Anthropic()\n"
    "def stamped():\n"
    "    return f'At {time.time()}'\n"
    "def ask(q, which):\n"
    "    system = {'stamped': stamped}[which]()\n"
    "    return client.messages.create(model='m', max_tokens=1, system=system, messages=[q])\n"
)


def test_a_step_whose_value_holds_a_colon_is_written_whole(project: Path) -> None:
    # the step's value is the dict literal's source (`{'stamped': stamped}`): its own ': '
    # was taken for the end of "`VALUE` passes it on: ", so the line read
    # "[origin: app.py:5, stamped}` passes it on: returned by stamped at app.py:7]"; the
    # line is a finding's when the chain is read back as proven, else --explain's
    (project / "app.py").write_text(THROUGH_A_DICT_OF_FUNCTIONS)
    explained = run("app.py", "--explain")
    assert explained.exit_code in (0, 1), explained.output
    text = explained.stdout + explained.stderr
    [line] = [row for row in text.splitlines() if "PC001" in row]
    assert line.endswith("[origin: app.py:5, returned by stamped at app.py:7]"), line


def test_a_staged_file_that_exclude_leaves_out_is_not_called_missing(project: Path) -> None:
    """pre-commit runs `promptcache lint --force-exclude FILE...`; a staged file the config
    excludes was 'warning: No Python files found', as if it did not exist."""
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nexclude = ["legacy/"]\n')
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(SUBDAY)
    (project / "legacy" / "older.py").write_text(SUBDAY)
    result = run("--force-exclude", "legacy/old.py", "legacy/older.py")
    assert result.exit_code == 0 and "All checks passed (0 files)" in result.stdout
    assert result.stderr == (
        "warning: No Python files to lint under the given path(s): 2 files left out by the "
        "config's exclude (--force-exclude applies it to the paths named on the command line)\n"
    )
    # without --force-exclude a file named is linted, excluded or not
    assert run("legacy/old.py").stdout.count("PC001") == 1


def test_staged_test_files_are_left_out_as_lint_dot_leaves_them_out(project: Path) -> None:
    """pre-commit runs `promptcache lint --force-exclude FILE...` on every staged file: a staged
    test (tests/helpers.py, test_app.py) was linted and failed the hook, while CI's
    `promptcache lint .` leaves tests out and passes."""
    (project / "tests").mkdir()
    (project / "tests" / "helpers.py").write_text(SUBDAY)
    (project / "test_app.py").write_text(SUBDAY)
    (project / "app.py").write_text("X = 1\n")
    staged = ("tests/helpers.py", "test_app.py", "app.py")
    assert run(".").exit_code == 0
    hook = run("--force-exclude", *staged)
    assert hook.exit_code == 0, hook.output
    assert hook.stdout == "All checks passed (1 file).\n"
    alone = run("--force-exclude", "tests/helpers.py", "test_app.py")
    assert alone.stderr == (
        "warning: No Python files to lint under the given path(s): 2 test files left out "
        "(--include-tests lints them)\n"
    )
    # the look-alikes: --include-tests in the hook's args, or the files named without
    # --force-exclude, lint them
    for args in (("--force-exclude", "--include-tests", *staged), staged):
        result = run(*args)
        assert result.exit_code == 1 and result.stdout.count("PC001") == 2, args
        assert "Found 2 findings in 2 files of 3 checked" in result.stdout, args


def test_staged_files_in_folders_the_walk_skips_are_left_out_and_counted(project: Path) -> None:
    """A staged .github/scripts/notes.py or build/gen.py was linted by the hook, though
    `promptcache lint .` skips hidden and build folders; each reason is counted apart."""
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nexclude = ["legacy/"]\n')
    for name in (".github/scripts/notes.py", "build/gen.py", "legacy/old.py"):
        (project / name).parent.mkdir(parents=True)
        (project / name).write_text(SUBDAY)
    assert run(".").stdout == "All checks passed (0 files).\n"
    hook = run("--force-exclude", ".github/scripts/notes.py", "build/gen.py", "legacy/old.py")
    assert hook.exit_code == 0 and hook.stdout == "All checks passed (0 files).\n"
    assert hook.stderr == (
        "warning: No Python files to lint under the given path(s): 2 files left out in folders "
        "that a folder's walk skips (hidden ones, __pycache__, build, dist, venv, node_modules, "
        "...); 1 file left out by the config's exclude (--force-exclude applies it to the paths "
        "named on the command line)\n"
    )
    # the look-alike: named without --force-exclude, each is linted
    named = run(".github/scripts/notes.py", "build/gen.py", "legacy/old.py")
    assert named.exit_code == 1 and named.stdout.count("PC001") == 3


def test_a_project_kept_in_a_test_folder_is_not_all_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the folders are counted from the config's folder: /.../test/.work/build/proj/app.py is
    # neither a test nor in a skipped folder
    root = tmp_path / "test" / ".work" / "build" / "proj"
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.promptcache.lint]\n")
    (root / "app.py").write_text(SUBDAY)
    monkeypatch.chdir(root)
    assert run("--force-exclude", "app.py").stdout.count("PC001") == 1
    assert run("--force-exclude", str(root / "app.py")).stdout.count("PC001") == 1


def test_select_and_ignore_apply_to_a_file_that_cannot_be_read(project: Path) -> None:
    """`--select PC001` dropped the PC000 of a file that does not parse but kept that of a
    link to nothing or a link loop: 3 info lines and '5 findings' for a run asking for PC001."""
    (project / "app.py").write_text(SUBDAY)
    (project / "broken.py").write_text("def (:\n")
    (project / "gone.py").symlink_to("missing.py")
    (project / "loop.py").symlink_to("loop.py")
    everything = run(".")
    assert everything.stdout.count("PC000") == 3
    for args in (["--select", "PC001"], ["--ignore", "PC000"]):
        result = run(".", *args)
        assert "PC000" not in result.stdout, args
        assert (
            "Found 1 finding in 1 file of 4 checked (1 error, 0 warnings, 0 info)" in result.stdout
        )
    (project / "pyproject.toml").write_text(
        '[tool.promptcache.lint.per-file-ignores]\n"gone.py" = ["PC000"]\n'
    )
    assert run(".").stdout.count("PC000") == 2


def test_a_notebook_named_is_said_to_be_left_out_not_passed(project: Path) -> None:
    """A notebook's JSON parses as one Python dict display, so `promptcache lint nb.ipynb`
    said 'All checks passed (1 file)' for a notebook whose cell puts the time in a prompt."""
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "source": SUBDAY}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (project / "nb.ipynb").write_text(json.dumps(notebook))
    (project / "app.py").write_text(SUBDAY)
    result = run("nb.ipynb", "app.py")
    assert result.stderr.startswith(
        "warning: skipped nb.ipynb: a Jupyter notebook is JSON, and its cells are not linted; "
        "export them (jupyter nbconvert --to script nb.ipynb) and lint the .py\n"
    )
    assert "Found 1 finding in 1 file of 1 checked" in result.stdout  # app.py's, not nb's
    alone = run("nb.ipynb")
    assert "All checks passed (0 files)" in alone.stdout and "(1 file)" not in alone.stdout


def test_a_hook_sees_only_the_staged_modules_and_pass_filenames_false_sees_them_all(
    project: Path,
) -> None:
    """docs/lint.md, pre-commit: the hook lints the staged files as one program, so a commit
    that stages only the module sending the request does not see the time another module
    puts in it; `pass_filenames: false` (no paths: the current folder) lints the project."""
    (project / "app").mkdir()
    (project / "app" / "__init__.py").write_text("")
    (project / "app" / "prompts.py").write_text(
        "import time\ndef system_prompt():\n    return f'At {time.time()}'\n"
    )
    (project / "app" / "bot.py").write_text(
        "import anthropic\nfrom app.prompts import system_prompt\n"
        "client = anthropic.Anthropic()\n"
        "def ask(q):\n"
        "    return client.messages.create(\n"
        "        model='m', max_tokens=1, system=system_prompt(), messages=[q])\n"
    )
    staged = run("--force-exclude", "app/bot.py")
    assert staged.exit_code == 0 and staged.stdout == "All checks passed (1 file).\n"
    for args in (("--force-exclude",), ("--force-exclude", "app/bot.py", "app/prompts.py")):
        result = run(*args)
        assert result.exit_code == 1, args
        assert result.stdout.count("app/bot.py:6:") == 1, result.stdout
        assert "[origin: app/prompts.py:3, returned by system_prompt at app/bot.py:6]" in (
            result.stdout
        )
