"""`promptcache check` on the demo's naive app and its report formats (the CLI on both demo apps:
test_demo_check_step.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
from check_support import REPO, cli

from promptcache.check.output import render
from promptcache.check.runner import CheckResult, run_check

NAIVE = REPO / "examples" / "naive_app.py"
LAYERED = REPO / "examples" / "layered_app.py"
SCHEMA = REPO / "tests" / "lint" / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture(scope="module")
def naive(tmp_path_factory: pytest.TempPathFactory) -> CheckResult:
    out = tmp_path_factory.mktemp("naive") / "out.txt"
    with out.open("w") as handle:
        return run_check([sys.executable, str(NAIVE)], stdout=handle)


def _ask_line() -> int:
    lines = NAIVE.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if "self.client.chat.completions" in line)


def test_naive_app_clock_and_request_id_are_found(naive: CheckResult) -> None:
    found = {(f.rule, f.causes, f.path) for f in naive.findings}
    assert found == {
        ("PC001", ("clock",), "messages[0].content"),
        ("PC002", ("random",), "messages[0].content"),
    }
    for finding in naive.findings:
        assert finding.site is not None
        assert (Path(finding.site.path), finding.site.line) == (NAIVE, _ask_line())
        assert finding.site.function == "StoryTime.ask"
        assert finding.requests == 3  # the story has three turns, each sends the system prompt
    clock = next(f for f in naive.findings if f.rule == "PC001")
    assert "Current time: " in (clock.before or "") and "Current time: " in (clock.after or "")
    request_id = next(f for f in naive.findings if f.rule == "PC002")
    assert "Request id: " in (request_id.before or "")


def test_text_names_rule_cause_and_call_site(
    naive: CheckResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    lines = render(naive, "text").splitlines()
    site = f"examples/naive_app.py:{_ask_line()} in StoryTime.ask"
    assert f"{site}: PC001 time-in-prefix (openai_chat, messages[0].content)" in lines
    assert f"{site}: PC002 unique-id-in-prefix (openai_chat, messages[0].content)" in lines
    assert any("caused by the wall clock" in line for line in lines)
    assert any("caused by random, uuid4 and secrets" in line for line in lines)
    assert lines[-1] == "promptcache check: 2 findings in 2 runs"


def test_json_report(naive: CheckResult) -> None:
    doc = json.loads(render(naive, "json"))
    assert [r["changes"] for r in doc["runs"]] == [
        [],
        ["clock", "hash_seed", "random", "listdir", "pid"],
    ]
    assert sorted((f["rule"], f["causes"]) for f in doc["findings"]) == [
        ("PC001", ["clock"]),
        ("PC002", ["random"]),
    ]
    assert {f["site"]["line"] for f in doc["findings"]} == {_ask_line()}


def test_sarif_report_is_valid_and_located_at_the_call_site(
    naive: CheckResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    doc = json.loads(render(naive, "sarif"))
    jsonschema.validate(doc, json.loads(SCHEMA.read_text(encoding="utf-8")))
    results = doc["runs"][0]["results"]
    assert sorted(r["ruleId"] for r in results) == ["PC001", "PC002"]
    for r in results:
        location = r["locations"][0]["physicalLocation"]
        assert location["artifactLocation"] == {
            "uri": "examples/naive_app.py",
            "uriBaseId": "%SRCROOT%",
        }
        assert location["region"] == {"startLine": _ask_line()}


def test_github_annotations(naive: CheckResult, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    lines = render(naive, "github").splitlines()
    assert len(lines) == 2
    prefix = f"::error file=examples/naive_app.py,line={_ask_line()},title=promptcache check PC00"
    assert all(line.startswith(prefix) for line in lines)
    assert "%0Arun 0: " in lines[0]


def test_output_file_and_bad_runs(tmp_path: Path) -> None:
    proc = cli("check", "--runs", "1", "--", sys.executable, "-c", "pass")
    assert proc.returncode == 2
    assert "--runs" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("check", "--format", "json", "--", sys.executable, "-c", "print('no requests')")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["findings"] == []  # the program's prints went to stderr
    assert proc.stderr == "no requests\nno requests\n"
    report = tmp_path / "report.json"
    proc = cli(
        "check", "--format", "json", "--output", str(report), "--",
        sys.executable, "-c", "print('no requests')",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "no requests\nno requests\n"
    # the report is in the file; a CI log (status 1 on findings) still says what it holds
    assert proc.stderr == f"promptcache check: 0 findings in 2 runs; report written to {report}\n"
    doc = json.loads(report.read_text())
    assert doc["findings"] == []
    assert [r["requests"] for r in doc["runs"]] == [0, 0]
    assert doc["notes"] == [
        "no LLM request was captured in run 0, so nothing was compared: the command sent none "
        "to the capture endpoint (a client given its own base_url, such as a local server's, "
        "sends past it: read the URL from OPENAI_BASE_URL or ANTHROPIC_BASE_URL, which check "
        'sets; see docs/check.md, "What it cannot see")'
    ]


NOTHING_CAPTURED = (
    "no LLM request was captured in run 0, so nothing was compared: the command sent none "
    "to the capture endpoint (a client given its own base_url, such as a local server's, "
    "sends past it: read the URL from OPENAI_BASE_URL or ANTHROPIC_BASE_URL, which check "
    'sets; see docs/check.md, "What it cannot see")'
)


def test_github_and_sarif_reports_carry_the_notes(tmp_path: Path) -> None:
    # the notes were in the text and JSON reports only: a CI job with --format github or
    # sarif whose program sent nothing check could compare showed nothing at all, exit 0
    quiet = [sys.executable, "-c", "pass"]
    proc = cli("check", "--format", "github", "--", *quiet, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "",  # the line that keeps a report off the program's unfinished last line
        "::notice title=promptcache check note::" + NOTHING_CAPTURED,
    ]
    proc = cli("check", "--format", "sarif", "--", *quiet, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text(encoding="utf-8")))
    assert doc["runs"][0]["results"] == []
    assert doc["runs"][0]["invocations"] == [
        {
            "executionSuccessful": True,
            "toolExecutionNotifications": [
                {"level": "note", "message": {"text": NOTHING_CAPTURED}}
            ],
        }
    ]


def test_output_that_is_a_file_the_command_names_is_refused(tmp_path: Path) -> None:
    # `-o smoke.py` for `-o smoke.sarif`: the report would replace the program's source
    program = tmp_path / "smoke.py"
    source = "print('ran')\n"
    program.write_text(source, encoding="utf-8")
    data = tmp_path / "questions.txt"
    data.write_text("q\n", encoding="utf-8")
    for output, args in (
        (program, [str(program)]),
        (tmp_path / "." / "smoke.py", [str(program)]),
        (data, [str(program), f"--questions={data}"]),
    ):
        proc = cli("check", "-o", str(output), "--", sys.executable, *args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == "" and "Traceback" not in proc.stderr
        assert proc.stderr == (
            f"error: cannot write --output {output}: the command names that file; the report "
            "would replace it: pick another file\n"
        )
    assert program.read_text(encoding="utf-8") == source
    assert data.read_text(encoding="utf-8") == "q\n"
    # a report beside them is written as before
    proc = cli("check", "-o", "report.txt", "--", sys.executable, str(program), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "report.txt").read_text(encoding="utf-8").endswith("0 findings in 2 runs\n")


def test_output_that_is_python_source_the_command_does_not_name_is_refused(
    tmp_path: Path,
) -> None:
    # `-- pytest tests` names the folder, `-- python -m pkg` a module: the report replaced a
    # test file or a module after both runs, as the command named none of them
    (tmp_path / "tests").mkdir()
    (tmp_path / "pkg").mkdir()
    test_file = tmp_path / "tests" / "test_app.py"
    module = tmp_path / "pkg" / "__main__.py"
    for source in (test_file, module, tmp_path / "pkg" / "__init__.py"):
        source.write_text("print('ran')\n", encoding="utf-8")
    for output, args in (
        ("tests/test_app.py", ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]),
        ("pkg/__main__.py", ["-m", "pkg"]),
        ("report.py", ["-m", "pkg"]),  # a new one too: else a second run would refuse it
    ):
        proc = cli("check", "-o", output, "--", sys.executable, *args, cwd=tmp_path)
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stdout
        assert proc.stderr == (
            f"error: cannot write --output {output}: a report is not Python source; a .py, "
            ".pyi or .pyw name would replace a source file or be read as one: pick another "
            "name\n"
        )
    assert not (tmp_path / "report.py").exists()
    assert test_file.read_text(encoding="utf-8") == module.read_text(encoding="utf-8")
    assert module.read_text(encoding="utf-8") == "print('ran')\n"


def test_an_output_that_cannot_be_written_is_refused_before_the_runs(tmp_path: Path) -> None:
    # only a missing folder was found before the runs: a link loop, a link into a missing
    # folder or an unwritable file failed after both runs had run (with --forward, paid for),
    # and a folder that is a link loop was a RuntimeError traceback
    (tmp_path / "loop.json").symlink_to("loop.json")
    (tmp_path / "loopdir").symlink_to("loopdir")
    (tmp_path / "dangling.json").symlink_to(Path("nowhere") / "x.json")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "file.txt").write_text("x")
    ran = [sys.executable, "-c", "print('ran')"]
    for name, why in (
        ("loop.json", "Too many levels of symbolic links"),
        ("loopdir/x.json", "Too many levels of symbolic links"),
        ("dangling.json", "No such file or directory (a symbolic link to 'nowhere/x.json')"),
        # the words of lint, report, proxy --db and log copy
        ("nodir/x.json", "folder nodir does not exist"),
        ("file.txt/x.json", "file.txt is not a folder"),  # was "folder file.txt does not exist"
        ("file.txt/sub/x.json", "file.txt is not a folder"),  # the file on the way is named
        ("dangling/x.json", "folder dangling does not exist (a symbolic link to 'nowhere')"),
    ):
        proc = cli("check", "-o", name, "--", *ran, cwd=tmp_path)
        assert (proc.returncode, proc.stdout) == (2, "")  # the command never ran
        assert proc.stderr == f"error: cannot write --output {name}: {why}\n"
    # the look-alikes: a new file, and a link to a file yet to be made, are written; the
    # probe leaves nothing behind when the run then fails
    (tmp_path / "link.json").symlink_to("target.json")
    for name in ("new.json", "link.json"):
        proc = cli("check", "-o", name, "--", *ran, cwd=tmp_path)
        assert (proc.returncode, proc.stdout) == (0, "ran\nran\n"), proc.stderr
        assert (tmp_path / name).read_text().endswith("0 findings in 2 runs\n")
    proc = cli("check", "-o", "failed.json", "--", sys.executable, "-c", "raise SystemExit(3)")
    assert proc.returncode == 2 and not (tmp_path / "failed.json").exists()


def test_an_output_of_dash_is_stdout(tmp_path: Path) -> None:
    # `-o -` wrote the report into a file named '-'
    proc = cli(
        "check", "--format", "json", "-o", "-", "--", sys.executable, "-c", "print('ran')",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["findings"] == []
    assert proc.stderr == "ran\nran\n"  # the program's output kept off the report's stdout
    assert not (tmp_path / "-").exists()


URLLIB_APP = """
import json, os, urllib.request, uuid
system = f"Request {uuid.uuid4()}. " + "Answer briefly. " * 400
body = {"model": "gpt-4o-mini", "messages": [
    {"role": "system", "content": system}, {"role": "user", "content": "hi"}]}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
    headers={"content-type": "application/json"})
urllib.request.urlopen(request).read()
"""


def test_sarif_result_without_a_call_site_still_has_a_location(tmp_path: Path) -> None:
    # a process without the hook (python -I ignores PYTHONPATH) sends no call site; GitHub code
    # scanning refuses a whole upload in which one result has no location, so the result is
    # located at the script the command runs
    (tmp_path / "smoke.py").write_text(URLLIB_APP, encoding="utf-8")
    proc = cli("check", "--format", "sarif", "--", sys.executable, "-I", "smoke.py", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text(encoding="utf-8")))
    [result] = doc["runs"][0]["results"]
    assert result["ruleId"] == "PC002"
    assert result["locations"] == [
        {"physicalLocation": {"artifactLocation": {"uri": "smoke.py", "uriBaseId": "%SRCROOT%"}}}
    ]
    assert result["message"]["text"].endswith(
        "; call site unknown, shown at smoke.py, which the command runs"
    )


def test_text_report_starts_on_its_own_line_after_output_without_a_newline() -> None:
    proc = cli("check", "--", sys.executable, "-c", "import sys; sys.stdout.write('progress 100%')")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "progress 100%progress 100%"  # both runs' output, then the report
    assert lines[1].startswith("run 0: baseline; 0 LLM request(s) captured in ")
    assert lines[-1] == "promptcache check: 0 findings in 2 runs"
    # output that ends its line is followed by a blank one, then the report
    proc = cli("check", "--", sys.executable, "-c", "print('done')")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("done\ndone\n\nrun 0: baseline; ")


STARTED_AT_IMPORT = """
import os
from datetime import datetime

from openai import OpenAI

STARTED = datetime.now().isoformat()
SYSTEM = f"You are a support assistant. Session started {STARTED}. " + "Answer briefly. " * 400
client = OpenAI(base_url=os.environ.get("OPENAI_BASE_URL"))

for question in ("hi", "bye"):
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
    )
"""


def test_a_clock_read_at_import_is_silent_under_lint_and_found_by_check(tmp_path: Path) -> None:
    # docs/check.md, "Run both": lint reads it as pinned once per process; check runs the
    # script in two processes, whose prefixes differ.
    app = tmp_path / "app.py"
    app.write_text(STARTED_AT_IMPORT, encoding="utf-8")
    lint = cli("lint", str(app), cwd=tmp_path)
    assert (lint.returncode, lint.stdout) == (0, "All checks passed (1 file).\n")
    check = cli("check", "--", sys.executable, str(app), cwd=tmp_path)
    assert check.returncode == 1
    assert f"{app.name}:12 in <module>: PC001 time-in-prefix" in check.stdout
    assert "seen in 2 requests from this call site" in check.stdout
