"""`promptcache lint` and `promptcache rules` end to end: exit codes, config, suppressions,
file discovery, fixes, output formats (SARIF validated against the OASIS 2.1.0 schema)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner, Result

from promptcache.cli import cli
from promptcache.lint_rules import LintConfig, lint_paths
from promptcache.lint_rules.registry import RULES

DATA = Path(__file__).parent / "data"
BAD = (
    "import datetime\nimport anthropic\nclient = anthropic.Anthropic()\n"
    "def ask(q):\n"
    "    now = datetime.datetime.now()\n"
    "    return client.messages.create(model='m', system=f'Now {now}', messages=[q])\n"
)
WARN_ONLY = (
    "import anthropic\nimport json\nclient = anthropic.Anthropic()\n"
    "def ask(q, fields):\n"
    "    profile = {k: fields[k] for k in set(fields)}  # keys in a set's order\n"
    "    return client.messages.create(\n"
    "        model='m', system=json.dumps(profile), messages=[q])\n"
)
#: a day-precision date: it breaks the prefix once a day, so it is info
INFO_ONLY = (
    "import datetime\nimport anthropic\nclient = anthropic.Anthropic()\n"
    "def ask(q):\n"
    "    return client.messages.create(\n"
    "        model='m', system=f'Day {datetime.date.today()}', messages=[q])\n"
)
FIXABLE = (
    "import json\nimport anthropic\nclient = anthropic.Anthropic()\n"
    "def ask(q, fields):\n"
    "    profile = {k: fields[k] for k in set(fields)}  # keys in a set's order\n"
    "    return client.messages.create(model='m', system=json.dumps(profile), messages=[q])\n"
)
CLEAN = "import anthropic\nclient = anthropic.Anthropic()\nSYSTEM = 'Be brief.'\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["lint", *args], catch_exceptions=False)


def test_exit_codes_follow_fail_on(project: Path) -> None:
    (project / "clean.py").write_text(CLEAN)
    (project / "warn.py").write_text(WARN_ONLY)
    assert run("clean.py").exit_code == 0
    assert "All checks passed" in run("clean.py").output
    assert run("warn.py").exit_code == 0
    assert run("warn.py", "--fail-on", "warning").exit_code == 1
    (project / "day.py").write_text(INFO_ONLY)
    day = run("day.py", "--fail-on", "warning")
    assert (
        day.exit_code == 0
        and "PC001" in day.output
        and "(0 errors, 0 warnings, 1 info)" in day.output
    )
    assert run("day.py", "--fail-on", "info").exit_code == 1
    (project / "bad.py").write_text(BAD)
    result = run("bad.py")
    assert result.exit_code == 1
    assert "bad.py:6:" in result.output and "PC001" in result.output
    assert "[origin: bad.py:5]" in result.output
    assert run("bad.py", "--fail-on", "never").exit_code == 0


def test_summary_counts_the_files_with_findings_apart_from_the_files_checked(
    project: Path,
) -> None:
    """Two findings in one file, two clean files beside it: "in 1 file of 3 checked", not "in
    3 files"."""
    both = (
        BAD + "\ndef ask_day(q):\n    return client.messages.create(\n"
        "        model='m', system=f'Day {datetime.date.today()}', messages=[q])\n"
    )
    (project / "both.py").write_text(both)
    (project / "clean.py").write_text(CLEAN)
    (project / "other.py").write_text(CLEAN)
    result = run(".", "--fail-on", "never")
    assert sum(line.startswith("both.py:") for line in result.output.splitlines()) == 2
    assert result.output.rstrip().splitlines()[-1] == (
        "Found 2 findings in 1 file of 3 checked (1 error, 0 warnings, 1 info)."
    )


def test_unparsable_file_is_pc000_and_the_run_goes_on(project: Path) -> None:
    (project / "broken.py").write_text("def ask(:\n    client.messages.create()\n")
    (project / "bad.py").write_text(BAD)
    result = run(".")
    assert result.exit_code == 1
    assert "broken.py:1:" in result.output and "PC000" in result.output
    assert "bad.py:6:" in result.output
    assert "Traceback" not in result.output


def test_config_select_ignore_and_errors(project: Path) -> None:
    (project / "bad.py").write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nignore = ["PC001"]\n')
    assert run("bad.py").exit_code == 0
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nselect = ["PC999"]\n')
    result = run("bad.py")
    assert result.exit_code == 2 and "unknown rule code(s) PC999" in result.output
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nselct = ["PC001"]\n')
    result = run("bad.py")
    assert result.exit_code == 2 and "unknown key(s) selct" in result.output
    (project / "pyproject.toml").write_text("[tool.promptcache.lint\n")
    assert run("bad.py").exit_code == 2
    (project / "pyproject.toml").unlink()
    assert run("bad.py", "--select", "PC002").exit_code == 0
    assert run("bad.py", "--select", "PC01").exit_code == 2
    for empty in ("", ",,", " , "):  # no code at all is a mistake, not "every rule"
        result = run("bad.py", "--select", empty, "--cache-dir", "fresh")
        assert result.exit_code == 2 and "names no rule code" in result.output, result.output
        assert "leave --select out to run every rule" in result.output
        # the same for --ignore (it was read as ignoring nothing, without a word)
        result = run("bad.py", "--ignore", empty, "--cache-dir", "fresh")
        assert result.exit_code == 2 and "names no rule code" in result.output, result.output
        assert "leave --ignore out to skip none" in result.output
    assert not (project / "fresh").exists()  # refused before any analysis
    result = run("bad.py", "--ignore", "PC002")  # the look-alike: a code is named
    assert result.exit_code == 1 and "PC001" in result.output


def test_an_empty_select_in_the_config_is_an_error_as_on_the_command_line(project: Path) -> None:
    # select = [] names no rule: an error, as --select "" is (not a run of every rule)
    (project / "bad.py").write_text(BAD)
    (project / "pyproject.toml").write_text("[tool.promptcache.lint]\nselect = []\n")
    result = run("bad.py")
    assert result.exit_code == 2 and "select = [] names no rule" in result.output
    # the look-alike: an empty ignore ignores nothing, and PC001 is found
    (project / "pyproject.toml").write_text("[tool.promptcache.lint]\nignore = []\n")
    result = run("bad.py")
    assert result.exit_code == 1 and "PC001" in result.output


def test_a_config_file_named_without_the_lint_table_is_an_error(project: Path) -> None:
    # --config names the file the settings come from: one without [tool.promptcache.lint] (a
    # ruff.toml-style flat select, or another tool's file) sets nothing, so it is not run on
    # defaults as if it had been read
    (project / "bad.py").write_text(BAD)
    for name, text in (
        ("flat.toml", 'select = ["PC002"]\n'),
        ("pyproject.toml", '[project]\nname = "app"\n[tool.ruff]\nselect = ["E"]\n'),
    ):
        (project / name).write_text(text)
        result = run("bad.py", "--config", name)
        assert result.exit_code == 2, result.output
        assert f"{name} has no [tool.promptcache.lint] table" in result.output
    # the look-alikes: the same file found on its own (not named) gives the defaults, and a
    # named file with the table is read
    assert run("bad.py").exit_code == 1
    (project / "flat.toml").write_text('[tool.promptcache.lint]\nselect = ["PC002"]\n')
    assert run("bad.py", "--config", "flat.toml").exit_code == 0


def test_cli_select_runs_a_rule_the_config_ignores(project: Path) -> None:
    # as ruff's: --select replaces the config's select and ignore; --ignore still adds to it
    (project / "bad.py").write_text(BAD)
    (project / "pyproject.toml").write_text(
        '[tool.promptcache.lint]\nselect = ["PC003"]\nignore = ["PC001"]\n'
    )
    assert run("bad.py").exit_code == 0
    result = run("bad.py", "--select", "PC001")
    assert result.exit_code == 1 and "bad.py:6:" in result.output and "PC001" in result.output
    assert run("bad.py", "--select", "PC001", "--ignore", "PC001").exit_code == 0
    (project / "pyproject.toml").write_text(
        '[tool.promptcache.lint]\nignore = ["PC001"]\n'
        '[tool.promptcache.lint.per-file-ignores]\n"bad.py" = ["PC001"]\n'
    )
    assert run("bad.py", "--select", "PC001").exit_code == 0  # per-file-ignores still apply


def test_a_selection_that_leaves_no_rule_says_that_nothing_is_checked(project: Path) -> None:
    # its "All checks passed" alone would read as a clean file
    (project / "bad.py").write_text(BAD)
    result = run("bad.py", "--select", "PC001", "--ignore", "PC001")
    assert result.exit_code == 0
    assert "warning: no rule is enabled" in result.stderr and "nothing is checked" in result.stderr
    # and the report's own line said "All checks passed (1 file)." of that run
    assert result.stdout == "Nothing checked: no rule is enabled (1 file)\n"
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nignore = ["ALL"]\n')
    assert "warning: no rule is enabled" in run("bad.py").stderr
    assert "no rule is enabled" not in run("bad.py", "--select", "PC001").stderr


def test_an_output_of_dash_is_stdout(project: Path) -> None:
    # `-o -` wrote the report (or the patch) into a file named '-'
    (project / "bad.py").write_text(BAD)
    result = run("bad.py", "-o", "-")
    assert result.exit_code == 1 and "bad.py:6:" in result.stdout
    result = run("bad.py", "--format", "json", "--output", "-")
    assert json.loads(result.stdout)[0]["code"] == "PC001"
    assert not (project / "-").exists()


def test_a_report_written_to_a_file_is_summed_up_on_stderr(project: Path) -> None:
    # `lint . --format sarif -o promptcache.sarif` failed a CI job (exit 1) with nothing printed:
    # the log said neither what was found nor where the report went
    (project / "bad.py").write_text(BAD)
    (project / "ok.py").write_text("x = 1\n")
    summary = "Found 1 finding in 1 file of 2 checked (1 error, 0 warnings, 0 info)"
    for extra in ([], ["--format", "sarif"], ["--format", "json"], ["--format", "github"]):
        result = run(".", *extra, "-o", "report.out")
        assert result.exit_code == 1 and result.stdout == "", extra
        assert result.stderr == f"promptcache lint: {summary}; report written to report.out\n"
    assert (project / "report.out").read_text().count("::error file=bad.py,line=6,") == 1
    result = run(".", "-o", "report.out")
    assert (project / "report.out").read_text().splitlines()[-1] == f"{summary}."
    # a clean run says so too, and the patch of --diff -o is not a report
    result = run("ok.py", "-o", "report.out")
    assert result.exit_code == 0
    assert (
        result.stderr
        == "promptcache lint: All checks passed (1 file); report written to report.out\n"
    )
    result = run("bad.py", "--diff", "-o", "fixes.patch")
    assert "report written" not in result.stderr
    result = run("bad.py", "--ignore", "ALL", "--format", "sarif", "-o", "report.out")
    assert result.stderr.endswith(
        "promptcache lint: Nothing checked: no rule is enabled (1 file); report written to "
        "report.out\n"
    )


def test_an_unwritable_output_is_refused_before_the_analysis(project: Path) -> None:
    # a missing folder for -o was found only when the report was written, after the whole lint:
    # here the analysis would end in a bad-suppression error and fill the cache folder
    (project / "e.py").write_text("x = 1  # promptcache: ignore[PC404]\n")
    (project / "a_file").write_text("")
    cache = project / "lint-cache"
    for target, why in [  # the words of check, report, proxy --db and log copy
        (Path("no", "report.txt"), f"folder {Path('no')} does not exist"),
        (Path("a_file", "report.txt"), "a_file is not a folder"),
        (Path("a_file", "sub", "report.txt"), "a_file is not a folder"),  # the file on the way
    ]:
        for extra in ([], ["--diff"]):
            result = run("e.py", *extra, "--cache-dir", str(cache), "-o", str(target))
            assert result.exit_code == 2, result.output
            assert f"Invalid value for '--output': cannot write {target}: {why}" in result.output
            assert "PC404" not in result.output and not cache.exists()
    # a writable one still runs the lint
    result = run("e.py", "--cache-dir", str(cache), "-o", "report.txt")
    assert result.exit_code == 2 and "PC404" in result.output


def test_a_named_folders_own_config_that_the_run_does_not_use_is_said(project: Path) -> None:
    # `promptcache lint app` from outside app/ ran on the defaults without a word, though
    # app/pyproject.toml ignores PC001: its findings looked like the project's own
    (project / "app").mkdir()
    (project / "app" / "bad.py").write_text(BAD)
    (project / "app" / "pyproject.toml").write_text('[tool.promptcache.lint]\nignore = ["PC001"]\n')
    result = run("app")
    assert result.exit_code == 1 and "PC001" in result.stdout
    assert result.stderr == (
        f"warning: {Path('app', 'pyproject.toml')} has a [tool.promptcache.lint] table that this "
        "run does not use: settings come from the nearest pyproject.toml at or above the current "
        f"folder (none: the defaults); run from app or pass --config "
        f"{Path('app', 'pyproject.toml')}\n"
    )
    assert run("app/bad.py").stderr == result.stderr  # a file names its folder's config too
    # the look-alikes: the same config named, or found from the current folder, says nothing
    result = run("app", "--config", "app/pyproject.toml")
    assert (result.exit_code, result.stderr) == (0, "")
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nignore = ["PC017"]\n')
    assert "(pyproject.toml); run from app" in run("app").stderr
    (project / "app" / "pyproject.toml").write_text("[project]\nname = 'app'\n")  # no table
    assert run("app").stderr == ""


def test_all_names_every_rule_on_the_command_line_and_in_the_config(project: Path) -> None:
    # as ruff's: ALL is every rule in --select and --ignore, and in select, ignore and
    # per-file-ignores (ignore = ["ALL"] ignores every rule)
    (project / "bad.py").write_text(BAD)
    result = run("bad.py", "--select", "ALL")
    assert result.exit_code == 1 and "PC001" in result.output
    result = run("bad.py", "--select", "all,PC001")
    assert result.exit_code == 1 and "PC001" in result.output
    result = run("bad.py", "--ignore", "ALL")
    assert (
        result.exit_code == 0 and result.stdout == "Nothing checked: no rule is enabled (1 file)\n"
    )
    nothing, passed = "Nothing checked: no rule is enabled", "All checks passed"
    for table, says in (
        ('ignore = ["ALL"]\n', nothing),
        ('select = ["ALL"]\nignore = ["ALL"]\n', nothing),
        ('[tool.promptcache.lint.per-file-ignores]\n"bad.py" = ["ALL"]\n', passed),
    ):
        (project / "pyproject.toml").write_text("[tool.promptcache.lint]\n" + table)
        result = run("bad.py")
        assert result.exit_code == 0 and result.stdout.startswith(says), table
    # the look-alikes: ALL selected in the config runs PC001, and so does --select over an ignore
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nselect = ["ALL"]\n')
    assert run("bad.py").exit_code == 1
    (project / "pyproject.toml").write_text('[tool.promptcache.lint]\nignore = ["ALL"]\n')
    result = run("bad.py", "--select", "ALL")
    assert result.exit_code == 1 and "PC001" in result.output
    (project / "pyproject.toml").write_text(
        '[tool.promptcache.lint.per-file-ignores]\n"other.py" = ["ALL"]\n'
    )
    assert run("bad.py").exit_code == 1


def test_per_file_ignores_exclude_and_gitignore(project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("generated/\n")
    for folder in ("generated", "scripts", "vendor", "src"):
        (project / folder).mkdir()
        (project / folder / "app.py").write_text(BAD)
    (project / "pyproject.toml").write_text(
        "[tool.promptcache.lint]\n"
        'exclude = ["vendor/"]\n'
        '[tool.promptcache.lint.per-file-ignores]\n"scripts/*.py" = ["PC001"]\n'
    )
    result = run(".")
    assert result.exit_code == 1
    assert "src/app.py:6:" in result.output
    for skipped in ("generated/", "vendor/", "scripts/"):
        assert skipped not in result.output
    # a file named directly is linted, unless --force-exclude (what pre-commit passes)
    assert run("vendor/app.py").exit_code == 1
    assert run("vendor/app.py", "--force-exclude").exit_code == 0


def test_per_file_ignores_match_the_path_of_a_symlink_not_its_target(project: Path) -> None:
    (project / "src").mkdir()
    (project / "scripts").mkdir()
    (project / "src" / "app.py").write_text(BAD)
    (project / "scripts" / "app.py").symlink_to(project / "src" / "app.py")
    (project / "pyproject.toml").write_text(
        '[tool.promptcache.lint.per-file-ignores]\n"scripts/*.py" = ["PC001"]\n'
    )
    assert run("scripts").exit_code == 0
    assert run("src").exit_code == 1


def test_suppression_comments(project: Path) -> None:
    trailing = BAD.replace("messages=[q])", "messages=[q])  # promptcache: ignore[PC001]")
    (project / "a.py").write_text(trailing)
    assert run("a.py").exit_code == 0
    above = BAD.replace(
        "    return client", "    # promptcache: ignore[PC001, PC002]\n    return client"
    )
    (project / "b.py").write_text(above)
    assert run("b.py").exit_code == 0
    (project / "c.py").write_text("# promptcache: ignore-file[PC001]\n" + BAD)
    assert run("c.py").exit_code == 0
    (project / "d.py").write_text(
        BAD.replace("messages=[q])", "messages=[q])  # promptcache: ignore[PC002]")
    )
    assert run("d.py").exit_code == 1
    (project / "e.py").write_text("x = 1  # promptcache: ignore[PC404]\n")
    result = run("e.py")
    assert result.exit_code == 2 and "PC404" in result.output


def test_fix_and_diff(project: Path) -> None:
    (project / "app.py").write_text(FIXABLE)
    result = run("app.py", "--diff")
    assert result.exit_code == 1
    assert (
        "+    return client.messages.create(model='m', system=json.dumps(profile, sort_keys=True)"
        in result.output
    )
    assert (project / "app.py").read_text() == FIXABLE
    result = run("app.py", "--fix", "--fail-on", "warning")
    assert result.exit_code == 0, result.output
    assert result.stderr == "fixed 1 finding in app.py\n"  # counted as the report counts
    assert "sort_keys=True" in (project / "app.py").read_text()
    assert run("app.py", "--diff").exit_code == 0
    twice = FIXABLE + FIXABLE.split("\n", 3)[3].replace("def ask(", "def ask_again(")
    (project / "two.py").write_text(twice)
    assert run("two.py").stdout.count("PC003 [*]") == 2
    assert run("two.py", "--fix").stderr == "fixed 2 findings in two.py\n"
    # --diff prints the patch and nothing else, and exits 1 only for a patch (as its help says):
    # an error no fix removes is neither printed nor a failure there
    (project / "bad.py").write_text(BAD)
    result = run("bad.py", "--diff")
    assert result.exit_code == 0 and result.output == ""
    assert "exit 1 only when there is a patch" in " ".join(run("--help").output.split())


def test_diff_with_output_writes_the_patch_there(project: Path) -> None:
    # --output holds what the run produces: the report, or with --diff the patch, which then
    # applies as it stands; stdout stays empty
    (project / "app.py").write_text(FIXABLE)
    result = run("app.py", "--diff", "--output", "fixes.patch")
    assert result.exit_code == 1 and result.stdout == ""
    # one line on stderr says what the file holds, as for a report written with --output
    assert result.stderr == (
        "promptcache lint: a patch fixing 1 finding in 1 file written to fixes.patch\n"
    )
    patch = (project / "fixes.patch").read_text()
    assert patch.startswith("--- a/app.py\n+++ b/app.py\n") and "sort_keys=True" in patch
    applied = subprocess.run(["git", "apply", "fixes.patch"], cwd=project, capture_output=True)
    assert applied.returncode == 0, applied.stderr
    assert "json.dumps(profile, sort_keys=True)" in (project / "app.py").read_text()
    # the look-alike: nothing left to fix writes an empty patch (no stale one stays) and exits 0
    result = run("app.py", "--diff", "--output", "fixes.patch")
    assert result.exit_code == 0 and (project / "fixes.patch").read_text() == ""
    assert result.stderr == (
        "promptcache lint: an empty patch (no autofix to apply) written to fixes.patch\n"
    )
    result = run("app.py", "--diff", "--output", str(project / "no" / "fixes.patch"))
    assert result.exit_code == 2 and "cannot write" in result.output


def test_fix_keeps_the_file_encoding_and_line_endings(project: Path) -> None:
    latin = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + FIXABLE.encode()
    crlf = FIXABLE.replace("\n", "\r\n").encode()
    bom = b"\xef\xbb\xbf" + FIXABLE.replace("[q])\n", "[q])  # \u00e9\n").encode()
    for name, raw in (("latin.py", latin), ("crlf.py", crlf), ("bom.py", bom)):
        (project / name).write_bytes(raw)
        diff = run(name, "--diff")
        assert diff.exit_code == 1 and "sort_keys=True" in diff.output, name
        assert run(name, "--fix").exit_code == 0, name
        fixed = (project / name).read_bytes()
        assert fixed == raw.replace(b"json.dumps(profile)", b"json.dumps(profile, sort_keys=True)")


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        # the BOM was left out of the patch's first context line: `git apply` refused it
        (
            "bom.py",
            b"\xef\xbb\xbf" + FIXABLE.replace("\nimport", ",").replace("\nc", "; c").encode(),
        ),
        # the fixed last line had no newline: its - and + lines were glued into one
        ("no_final_newline.py", FIXABLE.rstrip("\n").encode()),
        # a form feed and U+2028 in a string split lines where git sees none
        ("separators.py", (FIXABLE + "NOTE = 'a\x0cb\u2028c'\n").encode()),
        ("crlf.py", FIXABLE.replace("\n", "\r\n").encode()),
        # the hunk's text was UTF-8, the file latin-1: its context did not match
        (
            "latin.py",
            b"# -*- coding: latin-1 -*-\n"
            + FIXABLE.replace("keys in", "caf\u00e9 keys in").encode("latin-1"),
        ),
    ],
)
def test_diff_applies_with_git_as_fix_writes_it(project: Path, name: str, raw: bytes) -> None:
    (project / name).write_bytes(raw)
    assert run(name, "--diff", "--output", "fixes.patch").exit_code == 1
    applied = subprocess.run(["git", "apply", "fixes.patch"], cwd=project, capture_output=True)
    assert applied.returncode == 0, applied.stderr
    patched = (project / name).read_bytes()
    (project / name).write_bytes(raw)
    assert run(name, "--fix").exit_code == 0
    assert patched == (project / name).read_bytes() != raw


def test_output_to_a_missing_folder_is_a_usage_error(project: Path) -> None:
    (project / "bad.py").write_text(BAD)
    result = run("bad.py", "--output", str(project / "no" / "such" / "out.sarif"))
    assert result.exit_code == 2 and "out.sarif" in result.output


def test_json_and_github_formats(project: Path) -> None:
    (project / "bad.py").write_text(BAD)
    items = json.loads(run("bad.py", "--format", "json").output)
    assert [(i["code"], i["location"]["row"], i["name"]) for i in items] == [
        ("PC001", 6, "time-in-prefix")
    ]
    assert items[0]["related"][0]["row"] == 5
    github = run("bad.py", "--format", "github").output
    assert github.startswith("::error file=bad.py,line=6,col=")
    assert "title=PC001 time-in-prefix::" in github


def test_sarif_is_valid_sarif_2_1_0(project: Path) -> None:
    (project / "bad.py").write_text(BAD)
    (project / "fixable.py").write_text(FIXABLE)
    result = run(".", "--format", "sarif", "--output", "out.sarif")
    assert result.exit_code == 1
    log = json.loads((project / "out.sarif").read_text())
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(log)
    run_ = log["runs"][0]
    assert [r["id"] for r in run_["tool"]["driver"]["rules"]] == list(RULES)
    by_rule = {r["ruleId"]: r for r in run_["results"]}
    assert by_rule["PC001"]["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 5
    assert by_rule["PC003"]["fixes"][0]["artifactChanges"][0]["replacements"]


def test_parallel_run_matches_serial(tmp_path: Path) -> None:
    for index in range(60):
        (tmp_path / f"m{index:02}.py").write_text(BAD if index % 3 == 0 else CLEAN)
    config = LintConfig(root=tmp_path)
    serial = lint_paths([tmp_path], config, jobs=1)
    parallel = lint_paths([tmp_path], config, jobs=2)
    assert [r.diagnostics for r in parallel] == [r.diagnostics for r in serial]
    assert sum(len(r.diagnostics) for r in serial) == 20


def test_rules_command() -> None:
    runner = CliRunner()
    listing = runner.invoke(cli, ["rules"])
    assert listing.exit_code == 0
    for code in RULES:
        assert code in listing.output
    explain = runner.invoke(cli, ["rules", "pc001"])
    assert explain.exit_code == 0
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in explain.output
    assert "checked 2026-11-30" in explain.output
    assert runner.invoke(cli, ["rules", "PC999"]).exit_code == 2
    payload = json.loads(runner.invoke(cli, ["rules", "--json"]).output)
    assert [p["code"] for p in payload] == list(RULES)


def test_sarif_results_snapshot() -> None:
    """The results part of the SARIF log, pinned (rule metadata is checked above)."""
    from promptcache.lint_rules import lint_source
    from promptcache.lint_rules.sarif import render_sarif

    results = [lint_source(BAD, "app/bad.py"), lint_source(FIXABLE, "app/fixable.py")]
    got = json.loads(render_sarif(results))["runs"][0]["results"]
    want = json.loads((DATA / "results.sarif.json").read_text(encoding="utf-8"))
    assert got == want


def _artifact_locations(node: object) -> list[dict[str, str]]:
    if isinstance(node, dict):
        found = [node["artifactLocation"]] if "artifactLocation" in node else []
        return found + [a for v in node.values() for a in _artifact_locations(v)]
    if isinstance(node, list):
        return [a for v in node for a in _artifact_locations(v)]
    return []


def test_sarif_fix_insertion_has_an_explicit_empty_region(project: Path) -> None:
    """An insertion's deletedRegion ends where it starts (no end means: to the end of line)."""
    from promptcache.lint_rules import lint_source
    from promptcache.lint_rules.sarif import render_sarif

    log = json.loads(render_sarif([lint_source(FIXABLE, "fixable.py")]))
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(log)
    (result,) = log["runs"][0]["results"]
    (replacement,) = result["fixes"][0]["artifactChanges"][0]["replacements"]
    region = replacement["deletedRegion"]
    assert replacement["insertedContent"]["text"] == ", sort_keys=True"
    assert (region["endLine"], region["endColumn"]) == (region["startLine"], region["startColumn"])
    # a location that is a single point keeps its short form: only fixes need the end
    related = result["relatedLocations"][0]["physicalLocation"]["region"]
    assert "endColumn" not in related


def test_sarif_every_artifact_location_is_relative_to_srcroot(project: Path) -> None:
    from promptcache.lint_rules import lint_source
    from promptcache.lint_rules.sarif import render_sarif

    (project / "app").mkdir()
    absolute = str(project / "app" / "fixable.py")  # an absolute path under the root
    results = [lint_source(BAD, "bad.py"), lint_source(FIXABLE, absolute)]
    run_ = json.loads(render_sarif(results))["runs"][0]
    assert run_["originalUriBaseIds"] == {"%SRCROOT%": {"uri": project.resolve().as_uri() + "/"}}
    locations = _artifact_locations(run_["results"])
    assert len(locations) == 5  # two results, one origin, the fix's artifactChanges
    assert {(a["uri"], a.get("uriBaseId")) for a in locations} == {
        ("bad.py", "%SRCROOT%"),
        ("app/fixable.py", "%SRCROOT%"),
    }
    # a file outside the root: an absolute file URI, which SARIF forbids a uriBaseId for
    elsewhere = json.loads(render_sarif([lint_source(BAD, "bad.py")], root=project / "app"))
    outside = _artifact_locations(elsewhere["runs"][0]["results"])
    assert {a["uri"] for a in outside} == {(project / "bad.py").resolve().as_uri()}
    assert all("uriBaseId" not in a for a in outside)


@pytest.mark.parametrize("char", ["\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
def test_line_separators_inside_strings_keep_findings(project: Path, char: str) -> None:
    # str.splitlines ends a line at these characters; Python's parser does not, so a chain
    # checked against lines split that way pointed one line too low and was dropped
    (project / "app.py").write_text(f"NOTE = 'a{char}b'\n" + FIXABLE, encoding="utf-8")
    result = run("app.py", "--no-cache", "--format", "json")
    (finding,) = json.loads(result.output)
    assert finding["code"] == "PC003"
    assert finding["location"]["row"] == 7


def test_a_chain_step_in_another_module_gets_its_own_files_character_column(
    project: Path,
) -> None:
    # the time is born in prompts.py after 7 two-byte letters; the finding is in agent.py, whose
    # own lines cannot place it: JSON and SARIF give the character column in prompts.py
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "prompts.py").write_text(
        "from datetime import datetime\n\n\ndef system_prompt() -> str:\n"
        '    return "Сегодня: " + str(datetime.now())\n',
        encoding="utf-8",
    )
    (project / "pkg" / "agent.py").write_text(
        "import anthropic\n\nfrom pkg.prompts import system_prompt\n\n"
        "client = anthropic.Anthropic()\n\n\ndef ask(q):\n"
        "    return client.messages.create(model='m', system=system_prompt(), messages=[q])\n"
    )
    line = '    return "Сегодня: " + str(datetime.now())'
    expected = line.index("datetime.now") + 1  # 30; its UTF-8 byte offset + 1 would be 37
    (item,) = json.loads(run("pkg", "--format", "json").output)
    assert (item["filename"], item["code"]) == ("pkg/agent.py", "PC001")
    origin = item["related"][0]
    assert (origin["filename"], origin["row"], origin["column"]) == ("pkg/prompts.py", 5, expected)
    log = json.loads(run("pkg", "--format", "sarif").output)
    (result,) = log["runs"][0]["results"]
    where = result["relatedLocations"][0]["physicalLocation"]
    assert where["artifactLocation"]["uri"] == "pkg/prompts.py"
    assert (where["region"]["startLine"], where["region"]["startColumn"]) == (5, expected)


def test_a_chain_step_at_a_call_gets_the_calls_character_column(project: Path) -> None:
    # "`system_prompt` passes it on" at agent.py's call: JSON and SARIF gave column 1; the
    # call's own character column (after a two-byte letter) is named, as the text's line is
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "prompts.py").write_text(
        "from datetime import datetime\n\n\ndef system_prompt(who):\n"
        "    return str(datetime.now()) + who\n"
    )
    line = "    return client.messages.create(model='é', system=system_prompt(q), messages=[q])"
    (project / "pkg" / "agent.py").write_text(
        "import anthropic\n\nfrom pkg.prompts import system_prompt\n\n"
        f"client = anthropic.Anthropic()\n\n\ndef ask(q):\n{line}\n",
        encoding="utf-8",
    )
    expected = line.index("system_prompt(") + 1
    (item,) = json.loads(run("pkg", "--format", "json").output)
    origin, step = item["related"]
    assert (origin["filename"], origin["row"], origin["column"]) == ("pkg/prompts.py", 5, 16)
    assert step["message"] == "`system_prompt` passes it on: returned by system_prompt"
    assert (step["filename"], step["row"], step["column"]) == ("pkg/agent.py", 9, expected)
    log = json.loads(run("pkg", "--format", "sarif").output)
    (result,) = log["runs"][0]["results"]
    region = result["relatedLocations"][1]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (9, expected)


@pytest.mark.parametrize(
    "args",
    [("--select", "ALL,PC999"), ("--select", "PC999,all"), ("--ignore", "ALL,PC99")],
)
def test_an_unknown_code_beside_all_on_the_command_line_is_an_error(
    project: Path, args: tuple[str, ...]
) -> None:
    # `--select ALL,PC999` ran every rule and said nothing of PC999, while the config's
    # select = ["ALL", "PC999"] is an error
    (project / "bad.py").write_text(BAD)
    result = run("bad.py", *args)
    assert result.exit_code == 2, result.output
    assert "unknown rule 'PC99" in result.output and "PC001 " not in result.output
    # the look-alike: ALL beside a known code runs
    assert run("bad.py", args[0], "ALL,PC001").exit_code == (1 if args[0] == "--select" else 0)


UNPROVEN = (
    "import datetime\nimport anthropic\nfrom somelib import fill\n"
    "client = anthropic.Anthropic()\n"
    "def ask(q):\n"
    "    return client.messages.create(\n"
    "        model='m', system=fill(f'Now {datetime.datetime.now()}'), messages=[q])\n"
)


def _lint_merged(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command, its stdout and stderr in one stream, as a terminal shows them."""
    import sys

    return subprocess.run(
        [sys.executable, "-m", "promptcache", "lint", "--no-cache", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )


def test_explain_prints_the_unproven_flows_after_the_report(project: Path) -> None:
    """docs/lint.md: --explain prints them on stderr after the report; they came first on a
    terminal (before the findings and the summary line)."""
    (project / "app.py").write_text(UNPROVEN)
    (project / "bad.py").write_text(BAD)
    done = _lint_merged(project, "--explain", ".")
    lines = done.stdout.splitlines()
    assert done.returncode == 1  # the finding of bad.py; the unproven flow never counts
    summary = lines.index("Found 1 finding in 1 file of 2 checked (1 error, 0 warnings, 0 info).")
    heading = next(i for i, text in enumerate(lines) if text.startswith("explain: 1 unproven "))
    assert lines[0].startswith("bad.py:6:")
    assert summary < heading
    assert lines[heading + 1].startswith("  app.py:7:")
    assert "assumed to pass through fill()" in lines[heading + 1]
    assert len(lines) == heading + 2


def test_explain_with_no_unproven_flow_says_so(project: Path) -> None:
    """--explain on a tree without an unproven flow printed nothing, so a reader could not tell
    it had run; without --explain there is no such line."""
    (project / "bad.py").write_text(BAD)
    done = _lint_merged(project, "--explain", ".")
    assert done.stdout.splitlines()[-1] == "explain: 0 unproven flows"
    assert done.returncode == 1
    plain = _lint_merged(project, ".")
    assert "explain" not in plain.stdout
    assert plain.stdout.splitlines()[-1].startswith("Found 1 finding in 1 file")
