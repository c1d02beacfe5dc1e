"""`pytest --promptcache-check`: the same check inside an existing test suite."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from promptcache.check.runner import run_check

SUITE = """
import datetime
import openai

def system():
    return "Now: " + datetime.datetime.now().isoformat() + "\\n" + "Answer briefly. " * 400

def test_reply():
    client = openai.OpenAI()
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": system()}, {"role": "user", "content": "hi"}],
    )
    assert reply.choices[0].message.content
"""


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_plugin_runs_the_session_twice_and_reports(tmp_path: Path) -> None:
    (tmp_path / "test_prompt.py").write_text(SUITE, encoding="utf-8")
    report = tmp_path / "report.json"
    proc = _pytest(
        tmp_path,
        "--promptcache-check",
        "--promptcache-check-format=json",
        "--promptcache-check-output",
        str(report),
        "test_prompt.py",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.count("1 passed") == 2  # the suite ran in each run
    # the session fails (1) with its report in a file: one line says why
    assert proc.stderr.endswith(
        f"promptcache check: 1 finding in 2 runs; report written to {report}\n"
    ), proc.stderr
    assert "warning" not in proc.stdout  # none of check's making (time-machine's rewrite)
    import json

    doc = json.loads(report.read_text())
    [finding] = doc["findings"]
    assert (finding["rule"], finding["causes"]) == ("PC001", ["clock"])
    assert finding["site"]["function"] == "test_reply"
    assert Path(finding["site"]["path"]) == tmp_path / "test_prompt.py"


def test_plugin_is_inert_without_the_option_and_a_failing_suite_is_2(tmp_path: Path) -> None:
    (tmp_path / "test_fail.py").write_text("def test_no():\n    assert False\n", encoding="utf-8")
    plain = _pytest(tmp_path, "test_fail.py")
    assert plain.returncode == 1 and "1 failed" in plain.stdout
    checked = _pytest(tmp_path, "--promptcache-check", "test_fail.py")
    assert checked.returncode == 2
    # the session, not a command, and what pytest's status says
    assert (
        "error: the test session exited with status 1 (pytest: tests failed; check needs a "
        "session that passes) in run 0 (baseline)"
    ) in checked.stderr


def test_a_session_that_collects_no_test_says_so(tmp_path: Path) -> None:
    (tmp_path / "test_prompt.py").write_text(SUITE, encoding="utf-8")
    checked = _pytest(tmp_path, "--promptcache-check", "-k", "no_such_test", "test_prompt.py")
    assert checked.returncode == 2
    # the test was collected and deselected: pytest's status 5 is "no tests ran", not "none
    # collected"
    assert (
        "error: the test session exited with status 5 (pytest: no tests ran: none collected, "
        "or all deselected) in run 0 (baseline)"
    ) in checked.stderr


def test_plugin_timeout_stops_a_hanging_session(tmp_path: Path) -> None:
    (tmp_path / "test_hang.py").write_text(
        "import time\n\ndef test_hang():\n    time.sleep(120)\n", encoding="utf-8"
    )
    checked = _pytest(tmp_path, "--promptcache-check", "--promptcache-check-timeout=2", ".")
    assert checked.returncode == 2
    # the option given here, not `promptcache check`'s --timeout
    assert (
        "error: the test session ran past --promptcache-check-timeout 2 s in run 0 (baseline)"
    ) in checked.stderr


def test_the_option_in_addopts_checks_the_session_once(tmp_path: Path) -> None:
    # each run of the session reads addopts too, so each run checked itself again: runs of
    # runs without end, until something killed them
    import os
    import signal

    (tmp_path / "test_prompt.py").write_text(SUITE, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --promptcache-check\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_prompt.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so a runaway is stopped whole
    )
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # SIGTERM: each check stops its own runs before it ends
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 1, out + err
    assert out.count("1 passed") == 2  # the baseline and one perturbed run, each once
    assert "PC001 time-in-prefix" in out


def test_a_json_report_on_stdout_is_all_that_stdout_holds(tmp_path: Path) -> None:
    import json

    (tmp_path / "test_prompt.py").write_text(SUITE, encoding="utf-8")
    proc = _pytest(tmp_path, "--promptcache-check", "--promptcache-check-format=json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [finding] = json.loads(proc.stdout)["findings"]  # the sessions' output is on stderr
    assert finding["rule"] == "PC001"
    assert proc.stderr.count("1 passed") == 2
    # `--promptcache-check-output -` is the same stdout, not a file named '-'
    proc = _pytest(
        tmp_path, "--promptcache-check", "--promptcache-check-format=json",
        "--promptcache-check-output", "-",
    )  # fmt: skip
    assert [f["rule"] for f in json.loads(proc.stdout)["findings"]] == ["PC001"]
    assert not (tmp_path / "-").exists()


def test_bad_plugin_options_are_said_before_the_session_runs(tmp_path: Path) -> None:
    (tmp_path / "test_prompt.py").write_text(SUITE, encoding="utf-8")
    proc = _pytest(tmp_path, "--promptcache-check", "--promptcache-check-runs", "1")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "error: --promptcache-check-runs must be at least 2 (a baseline and one perturbed run), "
        "got 1\n"
    )
    nowhere = tmp_path / "nowhere" / "check.json"
    proc = _pytest(tmp_path, "--promptcache-check", f"--promptcache-check-output={nowhere}")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"error: cannot write --promptcache-check-output {nowhere}: folder "
        f"{nowhere.parent} does not exist\n"
    )
    # not "folder ... does not exist"; the file is named however deep the report would be
    suite = tmp_path / "test_prompt.py"
    for under_a_file in (suite / "check.json", suite / "sub" / "check.json"):
        proc = _pytest(
            tmp_path, "--promptcache-check", f"--promptcache-check-output={under_a_file}"
        )
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == (
            f"error: cannot write --promptcache-check-output {under_a_file}: {suite} is not a "
            "folder\n"
        )
    # an option of the plugin without --promptcache-check would silently run a plain session
    proc = _pytest(tmp_path, "--promptcache-check-format=json")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "error: --promptcache-check-format does nothing without --promptcache-check; add "
        "--promptcache-check to run the session under promptcache check, or drop "
        "--promptcache-check-format\n"
    )


def test_a_timeout_that_is_not_positive_names_the_plugin_option(tmp_path: Path) -> None:
    # it was refused by the runner as "--timeout must be a positive number of seconds", an
    # option this command line never had
    (tmp_path / "test_prompt.py").write_text(SUITE, encoding="utf-8")
    for value, shown in (("0", "0"), ("-1.5", "-1.5"), ("nan", "nan")):
        proc = _pytest(tmp_path, "--promptcache-check", f"--promptcache-check-timeout={value}")
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == (
            "error: --promptcache-check-timeout must be a positive number of seconds, got "
            f"{shown}\n"
        )


def test_a_value_the_plugin_does_not_take_is_its_error_exit_2(tmp_path: Path) -> None:
    # argparse refused these itself: pytest's usage error, exit 4, where every other bad
    # plugin option (and `promptcache check --format xml`) is exit 2
    (tmp_path / "test_prompt.py").write_text(SUITE, encoding="utf-8")
    for option, value, said in (
        ("format", "xml", "must be one of text, json, sarif, github"),
        ("format", "JSON", "must be one of text, json, sarif, github"),
        ("runs", "abc", "must be a whole number, at least 2"),
        ("runs", "2.5", "must be a whole number, at least 2"),
        ("timeout", "abc", "must be a positive number of seconds"),
    ):
        proc = _pytest(tmp_path, "--promptcache-check", f"--promptcache-check-{option}={value}")
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
        assert proc.stderr == f"error: --promptcache-check-{option} {said}, got {value!r}\n"
    # the same value in its own argument
    proc = _pytest(tmp_path, "--promptcache-check", "--promptcache-check-format", "xml")
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr == (
        "error: --promptcache-check-format must be one of text, json, sarif, github, got 'xml'\n"
    )


def test_a_report_over_a_test_file_the_session_names_is_refused(tmp_path: Path) -> None:
    # `--promptcache-check-output test_prompt.py` (for test_prompt.json) would replace the
    # test file with the report after both sessions ran
    suite = tmp_path / "test_prompt.py"
    suite.write_text(SUITE, encoding="utf-8")
    proc = _pytest(
        tmp_path, "--promptcache-check", "--promptcache-check-output", "test_prompt.py",
        "test_prompt.py",
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "error: cannot write --promptcache-check-output test_prompt.py: the session names "
        "that file; the report would replace it: pick another file\n"
    )
    assert suite.read_text(encoding="utf-8") == SUITE


def test_a_report_over_a_test_file_of_a_named_folder_is_refused(tmp_path: Path) -> None:
    # the session names the folder `tests`, not the file: the report replaced the test file
    # after both sessions ran; a Python source file is refused wherever it lies, as pytest with
    # no path at all collects test files it never names
    (tmp_path / "tests").mkdir()
    suite = tmp_path / "tests" / "test_prompt.py"
    suite.write_text(SUITE, encoding="utf-8")
    for output, paths in (
        ("tests/test_prompt.py", ["tests"]),
        ("./tests/test_prompt.py", []),
        ("report.PY", ["tests"]),
    ):
        proc = _pytest(
            tmp_path, "--promptcache-check", "--promptcache-check-output", output, *paths
        )
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stdout
        assert proc.stderr == (
            f"error: cannot write --promptcache-check-output {output}: a report is not "
            "Python source; a .py, .pyi or .pyw name would replace a source file or be read "
            "as one: pick another name\n"
        )
        assert suite.read_text(encoding="utf-8") == SUITE


def test_a_report_file_that_cannot_be_written_is_refused_before_the_sessions(
    tmp_path: Path,
) -> None:
    # a link loop as the report (or its folder) was a RuntimeError traceback
    (tmp_path / "test_prompt.py").write_text(SUITE, encoding="utf-8")
    (tmp_path / "loop.json").symlink_to("loop.json")
    (tmp_path / "loopdir").symlink_to("loopdir")
    for name in ("loop.json", "loopdir/x.json"):
        proc = _pytest(
            tmp_path, "--promptcache-check", "--promptcache-check-output", name,
            "test_prompt.py",
        )  # fmt: skip
        assert (proc.returncode, proc.stdout) == (2, "")  # no session ran
        assert proc.stderr == (
            f"error: cannot write --promptcache-check-output {name}: Too many levels of "
            "symbolic links\n"
        )


def test_a_finding_under_the_pytest_script_names_no_caller_in_it(tmp_path: Path) -> None:
    # `promptcache check -- pytest` runs the console script pip wrote into the environment's
    # bin folder; its frame was taken as the user's code, so every finding of the session said
    # "called from .venv/bin/pytest:8 in <module>"
    (tmp_path / "test_prompt.py").write_text(SUITE, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    script = Path(sysconfig.get_paths()["scripts"]) / "pytest"
    command = [str(script), "-q", "-p", "no:cacheprovider", "test_prompt.py"]
    with (tmp_path / "out.txt").open("w") as out:
        result = run_check(command, stdout=out, cwd=tmp_path)
    [finding] = result.findings
    assert finding.site is not None and finding.site.function == "test_reply"
    assert finding.site.callers == ()
