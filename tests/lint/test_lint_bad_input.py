"""`promptcache lint` answers bad input (config shapes, unwritable files, odd paths) with one
line naming what to change and exit status 2, never a traceback."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from promptcache.cli import cli

FIXABLE = (
    "import json\nimport anthropic\nclient = anthropic.Anthropic()\n"
    "def ask(q, fields):\n"
    "    profile = {k: fields[k] for k in set(fields)}  # keys in a set's order\n"
    "    return client.messages.create(model='m', system=json.dumps(profile), messages=[q])\n"
)
BAD = (
    "import datetime\nimport anthropic\nclient = anthropic.Anthropic()\n"
    "def ask(q):\n"
    "    now = datetime.datetime.now()\n"
    "    return client.messages.create(model='m', system=f'Now {now}', messages=[q])\n"
)
FIXED = FIXABLE.replace("json.dumps(profile)", "json.dumps(profile, sort_keys=True)")
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "app.py").write_text("x = 1\n")
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["lint", *args], catch_exceptions=False)


def one_error_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[tool.promptcache]\nlint = 5\n", "tool.promptcache.lint must be a table"),
        ('[tool.promptcache]\nlint = "x"\n', "tool.promptcache.lint must be a table"),
        ("[[tool.promptcache.lint]]\nselect = []\n", "not an array of tables"),
        ("[tool]\npromptcache = 5\n", "tool.promptcache must be a table"),
        ("tool = 5\n", "tool must be a table ([tool]), not an integer"),
        ('[tool.promptcache.lint]\nexclude = ["[z-a]"]\n', "bad pattern '[z-a]' in exclude"),
        ('[tool.promptcache.lint]\nexclude = ["a\\\\"]\n', "bad pattern 'a\\\\' in exclude"),
        (
            '[tool.promptcache.lint.per-file-ignores]\n"[z-a]" = ["PC001"]\n',
            "bad pattern '[z-a]' in per-file-ignores",
        ),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nests arrays or inline tables too deeply"),
        (
            '[[tool.promptcache.lint.sinks]]\ncall = "myapp.ask"\nsystem = -1\n',
            "sinks entry 'myapp.ask': system = -1 is not an argument index (0 or more",
        ),
        (
            '[[tool.promptcache.lint.sinks]]\ncall = "*.ask"\nmessages = [1, -2]\n',
            "sinks entry '*.ask': messages = -2 is not an argument index (0 or more",
        ),
        (
            '[[tool.promptcache.lint.sinks]]\ncall = "myapp.ask"\ntext = ""\n',
            "sinks entry 'myapp.ask': text = '' is not a keyword name",
        ),
        # a model that names no parameter would leave PC011 silently off for the sink
        (
            '[[tool.promptcache.lint.sinks]]\ncall = "myapp.ask"\nsystem = 0\nmodel = 5\n',
            "sinks entry 'myapp.ask': model = 5 is not a keyword name",
        ),
        (
            '[[tool.promptcache.lint.sinks]]\ncall = "myapp.ask"\nsystem = 0\nmodel = ["m"]\n',
            "sinks entry 'myapp.ask': model = ['m'] is not a keyword name",
        ),
        (
            '[[tool.promptcache.lint.sinks]]\ncall = "myapp.ask"\nsystem = 0\nmodel = "a-b"\n',
            "sinks entry 'myapp.ask': model = 'a-b' is not a keyword name",
        ),
    ],
)
def test_bad_config_shapes_are_one_line_errors(project: Path, toml: str, expected: str) -> None:
    (project / "pyproject.toml").write_text(toml)
    for args in ((".",), (".", "--config", "pyproject.toml")):
        line = one_error_line(run(*args))
        assert expected in line and "pyproject.toml" in line, line
        assert "unknown key" not in line


def test_an_unknown_key_of_a_sinks_entry_is_named_as_the_tables_are(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[[tool.promptcache.lint.sinks]]\ncall = "myapp.ask"\nsystem = 0\nprompt = 1\n'
    )
    line = one_error_line(run("."))
    assert line.endswith(
        "unknown key(s) prompt in a sinks entry; allowed: call, messages, model, system, text, "
        "tools"
    ), line


def run_limited(cwd: Path, *args: str, max_file_bytes: int) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child whose files cannot grow past ``max_file_bytes`` (works as root)."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.run(
        [sys.executable, "-c", "from promptcache.cli import main; main()", "lint", *args],
        cwd=cwd,
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_sink_given_by_index_0_or_a_keyword_is_accepted(project: Path) -> None:
    """The look-alike of ``system = -1``: index 0 and a keyword name both make the call a sink."""
    (project / "app.py").write_text(
        "import datetime\nfrom myapp import ask\n"
        "def go(q):\n    return ask(f'Now {datetime.datetime.now()}', q)\n"
        "def go_kw(q):\n    return ask(q, system_prompt=f'Now {datetime.datetime.now()}')\n"
    )
    (project / "pyproject.toml").write_text(
        '[[tool.promptcache.lint.sinks]]\ncall = "myapp.ask"\nsystem = [0, "system_prompt"]\n'
    )
    result = run("app.py")
    assert result.exit_code == 1, result.output
    assert "app.py:4:" in result.stdout and "app.py:6:" in result.stdout


def test_fix_that_cannot_be_written_is_an_error_and_never_truncates(tmp_path: Path) -> None:
    big = FIXABLE + "# " + "padding " * 200 + "\n"
    (tmp_path / "big.py").write_text(big)
    (tmp_path / "small.py").write_text(FIXABLE)
    result = run_limited(tmp_path, "big.py", "small.py", "--fix", max_file_bytes=1024)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "error: cannot write big.py: File too large" in result.stderr.splitlines()
    assert (tmp_path / "big.py").read_text() == big  # untouched, not cut short
    assert (tmp_path / "small.py").read_text() == FIXED  # the run went on
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != ".promptcache_cache")
    assert names == ["big.py", "small.py"]  # no temp files


@pytest.mark.skipif(AS_ROOT or sys.platform == "win32", reason="root may write read-only files")
def test_fix_of_a_read_only_file_or_folder_is_an_error(project: Path) -> None:
    (project / "ro.py").write_text(FIXABLE)
    (project / "ro.py").chmod(0o444)
    line = one_error_line(run("ro.py", "--fix"))
    assert line == "error: cannot write ro.py: Permission denied"
    assert (project / "ro.py").read_text() == FIXABLE
    (project / "sub").mkdir()
    (project / "sub" / "app.py").write_text(FIXABLE)
    (project / "sub").chmod(0o555)
    try:
        line = one_error_line(run("sub/app.py", "--fix"))
    finally:
        (project / "sub").chmod(0o755)
    assert line.startswith("error: cannot write sub/app.py: ")
    assert (project / "sub" / "app.py").read_text() == FIXABLE


def test_fix_keeps_the_file_mode_and_writes_through_symlinks(project: Path) -> None:
    (project / "app.py").write_text(FIXABLE)
    (project / "app.py").chmod(0o640)
    (project / "link.py").symlink_to(project / "app.py")
    assert run("link.py", "--fix").exit_code == 0
    assert (project / "link.py").is_symlink()
    assert (project / "app.py").read_text() == FIXED
    assert (project / "app.py").stat().st_mode & 0o777 == 0o640


def test_diff_never_writes_even_with_fix(project: Path) -> None:
    (project / "app.py").write_text(FIXABLE)
    result = run("app.py", "--fix", "--diff")
    assert result.exit_code == 1
    assert "sort_keys=True" in result.stdout
    assert (project / "app.py").read_text() == FIXABLE


def test_nothing_to_lint_warns_and_a_named_file_that_is_not_python_is_skipped(
    project: Path,
) -> None:
    (project / "docs").mkdir()
    (project / "docs" / "readme.txt").write_text(BAD)
    result = run("docs")
    assert result.exit_code == 0
    assert "warning: No Python files found under the given path(s)" in result.stderr
    result = run("docs/readme.txt")  # named explicitly: not Python source, said and left out
    assert result.exit_code == 0 and "PC001" not in result.stdout
    assert "warning: skipped 1 named file that is not Python source (docs/readme.txt)" in (
        result.stderr
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_a_pipe_named_like_a_python_file_is_left_out_of_a_folder(project: Path) -> None:
    # Reading a FIFO that nothing writes to blocks for ever: the run must not hang on it.
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text(BAD)
    os.mkfifo(project / "src" / "pipe.py")
    (project / "src" / "link.py").symlink_to(project / "src" / "pipe.py")
    (project / "src" / "gone.py").symlink_to(project / "src" / "missing.py")
    proc = subprocess.run(
        [sys.executable, "-c", "from promptcache.cli import main; main()", "lint", "src"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "src/app.py:" in proc.stdout and "PC001" in proc.stdout
    assert "pipe.py" not in proc.stdout and "link.py" not in proc.stdout
    # the look-alike: a broken link is a file that cannot be read, reported as PC000
    assert "src/gone.py:1:1: PC000" in proc.stdout
    assert "in 2 files of 2 checked" in proc.stdout


def test_output_onto_a_linted_file_is_refused_and_the_source_kept(project: Path) -> None:
    # -o tool (a slip for -o tool.txt) would replace the source with the report about it; a
    # script named on the command line is linted without a .py name (a .py name is refused
    # before the analysis: test_output_onto_python_source_is_refused_before_the_analysis)
    script = "#!/usr/bin/env python3\n" + FIXABLE
    (project / "tool").write_text(script)
    (project / "link").symlink_to(project / "tool")
    for args in (
        ("tool", "-o", "tool"),
        ("tool", "-o", "./link"),
        ("tool", "--diff", "-o", "tool"),
    ):
        result = run(*args)
        assert result.exit_code == 2, args
        assert "is one of the files being linted" in result.output
        assert (project / "tool").read_text() == script, args
    # the look-alike: a report file beside the sources is written
    result = run("tool", "-o", "report.txt")
    assert result.exit_code == 0 and "PC003" in (project / "report.txt").read_text()


def test_output_onto_python_source_is_refused_before_the_analysis(project: Path) -> None:
    # `lint . -o tests/test_app.py`: the default scope leaves the test file out, so it was not
    # "one of the files being linted", and the report replaced it; so did `-o other.py` for a
    # module not named. A .py, .pyi or .pyw name is refused before the analysis, which can
    # take minutes on a large tree: nothing is analysed, so no result is cached.
    (project / "app.py").write_text(FIXABLE)
    (project / "link.py").symlink_to(project / "app.py")
    (project / "tests").mkdir()
    test_file = project / "tests" / "test_app.py"
    other = project / "other.py"
    for source in (test_file, other):
        source.write_text("x = 1\n")
    for args in (
        (".", "-o", "tests/test_app.py"),
        ("app.py", "-o", "other.py"),
        ("app.py", "-o", "report.pyi"),  # a new one too: else a second run would refuse it
        ("app.py", "-o", "app.py"),  # linted ones as well
        (".", "-o", "./link.py"),
        (".", "--diff", "-o", "app.py"),
    ):
        proc = subprocess.run(
            [sys.executable, "-c", "from promptcache.cli import main; main()", "lint", *args],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (proc.returncode, proc.stdout) == (2, ""), args
        assert (
            f"{Path(args[-1])}: a report is not Python source; a .py, .pyi or .pyw name would "
            "replace a source file or be read as one: pick another name"
        ) in " ".join(proc.stderr.split())
        assert "Traceback" not in proc.stderr
    assert test_file.read_text() == other.read_text() == "x = 1\n"
    assert (project / "app.py").read_text() == FIXABLE
    assert not (project / "report.pyi").exists()
    assert not (project / ".promptcache_cache").exists()  # refused before any analysis
    # the look-alike: a report file that is not Python source, existing or not, is written
    (project / "report.txt").write_text("old\n")
    result = run(".", "-o", "report.txt")
    assert result.exit_code == 0 and "PC003" in (project / "report.txt").read_text()


@pytest.mark.parametrize(
    ("where", "why"),
    [("/proc/nope", "No such file or directory"), ("app.py/cache", "Not a directory")],
)
def test_a_cache_folder_that_cannot_be_written_is_said_once(
    project: Path, where: str, why: str
) -> None:
    """The cache drops writes it cannot make without failing the run; the run says so."""
    if where.startswith("/proc") and not Path("/proc/self").exists():
        pytest.skip("needs a /proc")
    (project / "app.py").write_text(BAD)
    result = run("app.py", "--cache-dir", where)
    assert result.exit_code == 1 and "PC001" in result.stdout
    assert result.stderr == f"warning: lint cache off: cannot write to {where} ({why})\n"
    assert run("app.py", "--cache-dir", where, "--no-cache").stderr == ""  # no cache, no word


def test_a_writable_cache_folder_is_used_silently_and_a_dry_probe_leaves_nothing(
    project: Path,
) -> None:
    (project / "app.py").write_text(BAD)
    result = run("app.py", "--cache-dir", "new/cache")
    assert result.exit_code == 1 and result.stderr == ""
    assert any((project / "new" / "cache").glob("lint-*/*.json"))  # the cache was written
    (project / "empty").mkdir()
    result = run("empty", "--cache-dir", "other/cache")  # nothing to lint, nothing to cache
    assert "lint cache" not in result.stderr
    assert not (project / "other").exists()


def test_a_named_link_loop_or_link_to_nothing_is_named_as_such(project: Path) -> None:
    (project / "self.py").symlink_to("self.py")
    (project / "gone.py").symlink_to("missing.py")
    for name, why in (
        ("self.py", "is a symbolic link loop (following it never reaches a file)"),
        ("gone.py", "is a symbolic link to 'missing.py', which does not exist"),
        ("nothere.py", "does not exist"),  # the look-alike: no link at all
    ):
        result = run(name)
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert result.stderr.splitlines()[-1] == (
            f"Error: Invalid value for '[PATHS]...': Path '{name}' {why}."
        )
    (project / "link.py").symlink_to("app.py")  # a link to a file is linted as that file
    assert run("link.py").exit_code == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_or_device_named_on_the_command_line_is_an_error(project: Path) -> None:
    # a FIFO named on the command line was dropped without a word ('No Python files found',
    # exit 0), as a folder's walk leaves it out
    os.mkfifo(project / "pipe.py")
    result = run("pipe.py")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.splitlines()[-1] == (
        "Error: Invalid value for '[PATHS]...': Path 'pipe.py' is a named pipe (FIFO), not a "
        "file or folder: name a Python file or a folder that holds some."
    )
    if Path(os.devnull).exists():
        assert "is a character device, not a file or folder" in run(os.devnull).stderr
    (project / "app.py").write_text(BAD)  # the look-alike: a folder holding the pipe is linted
    result = run(".")
    assert result.exit_code == 1 and "PC001" in result.stdout


def test_a_file_in_a_folder_that_cannot_be_read_is_not_called_unparsable(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "loop.py").symlink_to("loop.py")
    (project / "src" / "gone.py").symlink_to("missing.py")
    (project / "src" / "broken.py").write_text("def f(:\n")  # the look-alike: read, not parsed
    result = run("src", "--fail-on", "info")
    assert result.exit_code == 1  # PC000 is info: it fails the run only with --fail-on info
    lines = sorted(result.stdout.splitlines()[:3])
    assert lines[0].startswith("src/broken.py:1:")
    assert "PC000 info: cannot parse this file: " in lines[0]
    assert lines[1] == (
        "src/gone.py:1:1: PC000 info: cannot read this file: No such file or directory "
        "(a symbolic link to 'missing.py')"
    )
    assert lines[2] == (
        "src/loop.py:1:1: PC000 info: cannot read this file: Too many levels of symbolic links "
        "(a symbolic link loop)"
    )
    assert run("src").exit_code == 0


def test_a_warm_cache_names_files_from_the_folder_the_run_is_in(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache folder is shared by runs from any folder of the project (it sits beside
    pyproject.toml); a finding cached by a run from the root must not come back, from a
    subfolder, under the root's relative path (src/app.py, a file that is not there)."""
    (project / "pyproject.toml").write_text("[tool.promptcache.lint]\n")
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text(BAD)
    first = run("src", "--format", "json")
    assert first.exit_code == 1 and '"filename": "src/app.py"' in first.stdout
    monkeypatch.chdir(project / "src")
    for _ in range(2):  # cold for this folder, then warm
        again = run(".", "--format", "json")
        assert again.exit_code == 1 and '"filename": "app.py"' in again.stdout
        assert "src/app.py" not in again.stdout
    assert any((project / ".promptcache_cache").glob("lint-*/*.json"))  # it was one cache


@pytest.mark.skipif(sys.platform != "linux", reason="needs a file system that takes any bytes")
def test_a_file_name_that_is_not_utf8_is_linted_and_reported(tmp_path: Path) -> None:
    """b"bad\\xff.py" (a name from a Latin-1 system) made every run with the cache, and every
    SARIF report, end in UnicodeEncodeError: surrogates not allowed."""
    (tmp_path / os.fsdecode(b"bad\xff.py")).write_text(BAD)
    for fmt in ("text", "sarif", "text"):  # cold (writes the cache), SARIF, warm
        args = ["lint", ".", "--format", fmt]
        proc = subprocess.run(
            [sys.executable, "-c", "from promptcache.cli import main; main()", *args],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == 1 and proc.stderr == b"", proc.stderr.decode(errors="replace")
        if fmt == "text":
            assert proc.stdout.startswith(b"bad\xff.py:6:")  # the name as its bytes
        else:
            assert '"uri": "bad%FF.py"' in proc.stdout.decode()


def test_a_utf16_file_is_told_to_be_saved_as_utf8(project: Path) -> None:
    # a .py file saved as UTF-16 (Windows editors, PowerShell's Out-File) was reported as
    # "source code string cannot contain null bytes", which does not say what to do
    (project / "bom.py").write_bytes(BAD.encode("utf-16"))  # with its byte order mark
    (project / "le.py").write_bytes(BAD.encode("utf-16-le"))  # without one
    (project / "be.py").write_bytes(BAD.encode("utf-16-be"))
    (project / "nul.py").write_bytes(BAD.encode() + b"x = '\0'\n")  # look-alike: one stray NUL
    # the 512 bytes read end between the two halves of a surrogate pair (U+1F600)
    split = "# " + "x" * 253 + "\U0001f600\n" + BAD
    assert split.encode("utf-16-le")[510:514] == "\U0001f600".encode("utf-16-le")
    (project / "split.py").write_bytes(split.encode("utf-16-le"))
    # look-alikes: a binary file (an x86-64 ELF executable's header and program headers) has
    # NUL bytes at most odd offsets too, but does not decode as UTF-16 text; nor with a mark
    fields = (2, 1, 1, 0, 0, 3, 62, 1, 0x61D0, 64, 0x24770, 0, 64, 56, 13, 64, 31, 30)
    elf_header = struct.pack("<4s5B7x2HI3QI6H", b"\x7fELF", *fields)
    program_header = struct.pack("<2I6Q", 6, 4, 64, 64, 64, 0x2D8, 0x2D8, 8)
    elf = elf_header + program_header * 8
    (project / "elf.py").write_bytes(elf)
    (project / "markelf.py").write_bytes(b"\xff\xfe" + elf)
    names = ("bom.py", "le.py", "be.py", "split.py", "nul.py", "elf.py", "markelf.py")
    result = run(*names, "--fail-on", "info")
    assert result.exit_code == 1 and "Traceback" not in result.output
    messages = {
        line.split(":", 1)[0]: line.split(" PC000 info: ", 1)[1]
        for line in result.stdout.splitlines()
        if " PC000 " in line
    }
    utf16 = (
        "cannot parse this file: source code string cannot contain null bytes (the file seems "
        "to be UTF-16; save it as UTF-8)"
    )
    nul = "cannot parse this file: source code string cannot contain null bytes"
    assert messages == {
        "bom.py": utf16,
        "le.py": utf16,
        "be.py": utf16,
        "split.py": utf16,
        "nul.py": nul,
        "elf.py": nul,
        "markelf.py": nul,
    }, result.stdout
