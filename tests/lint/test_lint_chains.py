"""Every step of every finding's chain is checked against the code it names.

Over the whole test corpus (the rule fixtures, the whole programs, the real cases' bad and
fixed sides, and ``examples/lint_app``), each related location of each finding must point at a
line of its file, and a step that names a value or a call (``Related.value``) must find that
name written on that line: the origin's ``now`` for ``datetime.now()``, a helper's name where
it is called. A chain that names a wrong origin (a time value born in a function that does not
produce the reported value) fails here.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from lint_markers import FIXTURES, fixture_config

from promptcache.lint_rules import Diagnostic, Related, lint_source
from promptcache.lint_rules.chains import Lines, chain_holds
from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.facts import ASSUMED, OVERRIDE, SEARCHED, Fact, Kind, Value, canonical
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
FIXTURE_FILES = sorted(p for p in FIXTURES.glob("PC*.py") if not p.name.endswith(".fixed.py"))
PROGRAMS = sorted(
    [p for p in (HERE / "programs").iterdir() if p.is_dir()]
    + [p for p in (HERE / "real_cases").glob("*/*") if p.is_dir()]
    + [ROOT / "examples" / "lint_app"]
)


@cache
def _lines(path: str) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


#: a step of a chain: "`name` passes it on: <what> <function>" (``LintContext.chain``)
_STEP = re.compile(r"^`(?P<name>[^`]+)` passes it on: (?P<what>.+?) (?P<function>[\w.]+)(\(\))?$")
#: what a step says the call did with the value
_STEP_KINDS = ("returned by", "stored by", ASSUMED, SEARCHED, "read from the property")
#: a step at the call that sends the value inside a method chosen at run time (an override of
#: the abstract method called, or the method of one of the classes the receiver may be)
_SENT = re.compile(
    rf"^`(?P<name>[^`]+)` passes it on: {OVERRIDE} (?P<function>[\w.]+), "
    r"(which overrides [\w.]+|its class chosen at run time)$"
)


def _calls(line: str, name: str) -> bool:
    """True when ``line`` calls ``name`` (``name(``, ``.name(``, ``name[...](``, ``name``
    ending the line, its arguments on the next, or a field's ``default_factory=name``, which
    pydantic calls for each instance built)."""
    if re.search(rf"(?<![\w]){re.escape(name)}\s*(\(|\[|$)", line.rstrip()) is not None:
        return True
    return re.search(rf"default_factory\s*=\s*{re.escape(name)}(?![\w.])", line) is not None


def _check(diagnostics: list[Diagnostic]) -> list[str]:
    """What is wrong with the chains of ``diagnostics`` (empty when every step holds).

    Each location is a line of its file; the origin's line holds the value it names; each step
    is a call: its line calls the name it gives, it says what the call did (returned, stored or
    an unproven pass-through), or a property read (its line reads ``.name``), and the function
    it names is the one called there (the name written is that function's last part, a
    method's or the function's own name, or its class for a constructor, unless the line calls
    an entry of a table of callables)."""
    wrong = []
    for d in diagnostics:
        where = f"{d.code} at {d.location.path}:{d.location.line}"
        for step in (d.location, *(r.location for r in d.related)):
            if not 1 <= step.line <= len(_lines(step.path)):
                wrong.append(f"{where}: no line {step}")
        for r in d.related:
            if not (r.origin or "passes it on" in r.message):
                continue
            if not 1 <= r.location.line <= len(_lines(r.location.path)):
                continue
            line = _lines(r.location.path)[r.location.line - 1]
            if "passes it on" in r.message and not r.value:
                wrong.append(f"{d.code}: a step without a name: {r.message}")
            if r.value and r.value not in line:
                wrong.append(
                    f"{where}: step {r.location.path}:{r.location.line} names `{r.value}`, "
                    f"the line is {line.strip()!r} ({r.message})"
                )
            if r.origin or not r.value:
                continue
            sent = _SENT.match(r.message)
            if sent is not None:
                # the line calls the name given, inside the method the step names
                if not _calls(line, r.value) or not _inside(
                    r.location.path, r.location.line, sent["function"]
                ):
                    wrong.append(
                        f"{where}: step {r.location.path}:{r.location.line} is not a "
                        f"call of `{r.value}` in {sent['function']}: {line.strip()!r}"
                    )
                continue
            step = _STEP.match(r.message)
            if step is None or step["what"] not in _STEP_KINDS:
                wrong.append(f"{where}: a step that says no call: {r.message!r}")
                continue
            read = step["what"] == "read from the property"
            if read and not re.search(rf"\.{re.escape(r.value)}(?!\w)", line):
                wrong.append(
                    f"{where}: step {r.location.path}:{r.location.line} does not read "
                    f"`.{r.value}`: {line.strip()!r} ({r.message})"
                )
            if not read and not _calls(line, r.value):
                wrong.append(
                    f"{where}: step {r.location.path}:{r.location.line} does not call "
                    f"`{r.value}`: {line.strip()!r} ({r.message})"
                )
            parts = step["function"].split(".")
            named = parts[-1] == r.value or parts[-2:] == [r.value, "__init__"]
            # a class without an __init__ of its own runs its base's (``RemoteProvider.__init__``
            # for ``RegionProvider()``)
            inherited = (
                parts[-1] == "__init__"
                and len(parts) >= 2
                and parts[-2] in _bases(r.location.path, r.value)
            )
            named = named or inherited
            # a table of callables (``factories["now"]()``) is called through its name
            table = re.search(rf"(?<![\w]){re.escape(r.value)}\s*\[", line) is not None
            if step["what"] != ASSUMED and not named and not table:
                wrong.append(
                    f"{where}: step {r.location.path}:{r.location.line} calls `{r.value}` "
                    f"but names {step['function']} ({r.message})"
                )
    return wrong


def _bases(path: str, name: str) -> set[str]:
    """The names of the classes that class ``name`` of ``path`` inherits from, through
    the classes of that file (``class B(A)`` and ``class C(B)`` give ``{"B", "A"}`` for C)."""
    classes = {
        node.name: [b.id for b in node.bases if isinstance(b, ast.Name)]
        for node in ast.walk(ast.parse("\n".join(_lines(path))))
        if isinstance(node, ast.ClassDef)
    }
    found: set[str] = set()
    todo = list(classes.get(name, []))
    while todo:
        base = todo.pop()
        if base not in found:
            found.add(base)
            todo.extend(classes.get(base, []))
    return found


def _inside(path: str, line: int, function: str) -> bool:
    """Whether ``line`` of ``path`` is in the body of the method or function named
    ``function`` (``Class.method`` or ``function``)."""
    *owner, name = function.split(".")
    for node in ast.walk(ast.parse("\n".join(_lines(path)))):
        if isinstance(node, ast.ClassDef) and owner and node.name != owner[-1]:
            continue
        for sub in ast.iter_child_nodes(node) if owner else [node]:
            if (
                isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef))
                and sub.name == name
                and sub.lineno <= line <= (sub.end_lineno or sub.lineno)
                and (not owner or isinstance(node, ast.ClassDef))
            ):
                return True
    return False


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_chains_hold(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    result = lint_source(source, str(path), fixture_config(path, source))
    assert not _check(list(result.diagnostics))


@pytest.mark.parametrize("folder", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_program_chains_hold(folder: Path) -> None:
    config = parse_table({}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1, include_tests=True)
    diagnostics = [d for r in results for d in r.diagnostics]
    assert not _check(diagnostics)


def test_chains_name_their_steps() -> None:
    """The corpus has chains through functions, and each such step is named and checked."""
    folder = HERE / "programs" / "c_modules"
    config = parse_table({}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1)
    steps = [
        r
        for res in results
        for d in res.diagnostics
        for r in d.related
        if "passes it on" in r.message
    ]
    assert steps and all(r.value for r in steps)


def test_text_json_and_sarif_name_the_same_steps(tmp_path: Path) -> None:
    """Each output format carries the whole chain: the text suffix names every step as
    path:line, JSON lists them under ``related`` with their ``value``, SARIF as
    ``relatedLocations``."""
    import json

    from promptcache.lint_rules.output import render_json, render_text
    from promptcache.lint_rules.sarif import render_sarif

    folder = HERE / "real_cases" / "clawbolt_datetime_section" / "bad"
    config = parse_table({"select": ["PC001"]}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1)
    findings = [d for r in results for d in r.diagnostics]
    assert findings and any(len(d.related) >= 3 for d in findings)
    text = render_text(results).splitlines()
    items = json.loads(render_json(results))
    sarif = json.loads(render_sarif(results))["runs"][0]["results"]
    assert len(text) - 1 == len(items) == len(sarif) == len(findings)
    for d, line, item, result in zip(findings, text[:-1], items, sarif, strict=True):
        steps = [r for r in d.related if "passes it on" in r.message]
        for r in steps:
            assert f"at {r.location.path}:{r.location.line}" in line
        assert [(j["row"], j["value"]) for j in item["related"]] == [
            (r.location.line, r.value) for r in d.related
        ]
        assert [
            loc["physicalLocation"]["region"]["startLine"] for loc in result["relatedLocations"]
        ] == [r.location.line for r in d.related]


def _fact(*steps: tuple[str, int, str, str]) -> Fact:
    return Fact(Kind.TIME, 8, 11, "time.time()", "subday", path="clock.py", via=steps)


def test_one_chain_per_fact_the_smallest_whatever_the_order() -> None:
    """The same origin reached along several paths is one fact: the proven chain, then the
    shortest, then the first by (file, line) of its steps, in whichever order they meet."""
    short = _fact(("returned by morning", 12, "morning", "app.py"))
    later = _fact(("returned by evening", 13, "evening", "app.py"))
    longer = _fact(
        ("returned by evening", 13, "evening", "app.py"),
        ("returned by late", 20, "late", "app.py"),
    )
    unproven = _fact((f"{ASSUMED} decorate()", 9, "decorate", "clock.py"))
    other = Fact(Kind.UNIQUE, 3, 0, "uuid4()", via=unproven.via)
    facts = [longer, unproven, later, short, other]
    for order in (facts, facts[::-1], facts[2:] + facts[:2]):
        assert canonical(frozenset(order)) == {short, other}
        assert Value(frozenset(order)).facts == {short, other}
    assert canonical(frozenset({unproven, longer})) == {longer}
    assert canonical(frozenset({short, other})) == {short, other}


CLI = (sys.executable, "-c", "from promptcache.cli import main; main()", "lint")


def test_program_findings_do_not_depend_on_the_hash_seed() -> None:
    """``programs/p_many_paths``: one origin reaches the prompt through four helpers (one a
    call the analysis cannot see). Under four hash seeds (set iteration orders) the real CLI
    prints the same report, whose one finding names the shortest proven chain."""
    folder = HERE / "programs" / "p_many_paths"
    reports = set()
    for seed in ("0", "1", "2", "3"):
        done = subprocess.run(
            [*CLI, "--no-cache", "--jobs", "1", "--format", "json", str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert done.returncode == 1, done.stderr
        reports.add(done.stdout)
    assert len(reports) == 1
    (finding,) = json.loads(reports.pop())
    steps = [(Path(r["filename"]).name, r["row"], r["value"]) for r in finding["related"]]
    assert steps == [
        ("clock.py", 8, "strftime"),
        ("clock.py", 12, "stamp"),
        ("app.py", 11, "morning"),
        ("app.py", 18, "system_prompt"),
    ]


def test_owner_passed_whole_names_the_field_its_helper_reads() -> None:
    """``programs/w_owner_fields``: an owner builds a helper with itself
    (``ReportGenerator(self)``) whose method reads the owner's ``cfg.agent_role`` into a system
    message. The one finding (PC017, info) names the environment value of that field, stored
    by ``Config.__init__``, not what the owner's memory holds, and no report that calls the
    owner per request is flagged for the memory's environment value."""
    folder = HERE / "programs" / "w_owner_fields"
    config = parse_table({}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1)
    (finding,) = [d for r in results for d in r.diagnostics]
    assert finding.code == "PC017"
    assert Path(finding.location.path).name == "agent.py" and finding.location.line == 19
    steps = [(Path(r.location.path).name, r.location.line, r.value) for r in finding.related]
    assert steps == [("config.py", 6, "get"), ("agent.py", 13, "Config")]
    assert not _check([finding])


def test_info_findings_chains_are_checked_too() -> None:
    """Info-level findings carry chains as errors do, and their origins are checked against
    the code: PC017's environment values (a read such as ``os.environ`` names ``environ``,
    a call such as ``os.getcwd()`` names ``getcwd``), in the rule's fixture and in
    ``programs/w_owner_fields``, where the value passes through a constructor of another
    module."""
    from promptcache.lint_rules import Severity
    from promptcache.lint_rules.context import written_name

    path = FIXTURES / "PC017.py"
    source = path.read_text(encoding="utf-8")
    diagnostics = list(lint_source(source, str(path), fixture_config(path, source)).diagnostics)
    folder = HERE / "programs" / "w_owner_fields"
    config = parse_table({}, folder, KNOWN_CODES)
    diagnostics += [d for r in lint_paths([folder], config, jobs=1) for d in r.diagnostics]
    info = [d for d in diagnostics if d.severity is Severity.INFO]
    origins = [r for d in info for r in d.related if r.origin]
    assert len(origins) >= 3 and all(r.value for r in origins)
    assert {r.value for r in origins} >= {"get", "getcwd"}
    # a value read rather than called is named by its last name
    assert written_name("os.environ") == "environ"
    assert written_name("the repr of a set") == ""
    assert any("passes it on" in r.message for d in info for r in d.related)
    assert not _check(info)


def test_client_field_none_until_connect_keeps_its_class() -> None:
    """``programs/z_client_fields``: a session's client field is ``PrivateAttr(default=None)``
    until ``connect()`` stores a project client there (and ``close()`` sets it back to
    ``None``). The window size the browser answers through the client's library method is not
    the client's timeout (read from the environment), nor is what another method of the
    client returns without reading it, nor the page title read through the client that
    ``ensure_client()`` returns on two paths; the one finding (PC017, info) is the system
    prompt that tells the timeout, with its chain: the environment read, the client built, the
    session's method that returns it."""
    folder = HERE / "programs" / "z_client_fields"
    config = parse_table({}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1)
    (finding,) = [d for r in results for d in r.diagnostics]
    assert finding.code == "PC017"
    assert Path(finding.location.path).name == "agent.py" and finding.location.line == 22
    steps = [(Path(r.location.path).name, r.location.line, r.value) for r in finding.related]
    assert steps == [
        ("rpc.py", 7, "getenv"),
        ("session.py", 21, "TimedClient"),
        ("agent.py", 22, "timeout_note"),
    ]
    assert not _check([finding])


def test_getattr_of_a_constant_name_reads_that_field() -> None:
    """``programs/z_getattr_fields``: ``getattr(obj, "name"[, default])`` reads field ``name``
    as ``obj.name`` does, also in a helper given the object by a method that passes on its own
    parameter. The SDK client's notifications (empty when built, filled from the server's
    output) hold neither its environment-sized buffer nor the key and URL it starts the
    server with, and a started process (``asyncio.create_subprocess_exec``,
    ``subprocess.Popen``, ``subprocess.run``) carries neither its arguments nor its ``env=``
    into its pid or its output; the settings' persona, from the environment, is found at both
    system messages with its chain: the environment read, the settings built."""
    folder = HERE / "programs" / "z_getattr_fields"
    config = parse_table({}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1)
    findings = sorted((d for r in results for d in r.diagnostics), key=lambda d: d.location.line)
    assert [(d.code, Path(d.location.path).name, d.location.line) for d in findings] == [
        ("PC017", "agent.py", 39),
        ("PC017", "agent.py", 45),
    ]
    for finding in findings:
        steps = [(Path(r.location.path).name, r.location.line, r.value) for r in finding.related]
        assert steps == [("client.py", 53, "get"), ("agent.py", 12, "Settings")]
    assert not _check(findings)


def test_a_measured_system_message_is_not_the_sink_named() -> None:
    """``programs/z_measured_messages``: two executors build a ``{"role": "system"}`` message
    of their stored prompt only to count its tokens before trimming the history. The one
    that sends the prompt through a transport the linter does not know gives no finding; the
    one that sends it to ``chat.completions.create`` is found, and its chain names that
    request, not the counted message."""
    folder = HERE / "programs" / "z_measured_messages"
    config = parse_table({}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1)
    (finding,) = [d for r in results for d in r.diagnostics]
    assert finding.code == "PC001"
    assert Path(finding.location.path).name == "app.py" and finding.location.line == 15
    assert "(OpenAIExecutor.run() -> chat.completions.create(messages=))" in finding.message
    assert "message)" not in finding.message
    assert not _check([finding])


def test_a_chain_whose_places_do_not_show_it_is_not_proven() -> None:
    """``chains.chain_holds`` reads back each place a chain names: the findings of
    ``programs/c_modules`` hold against their files; the same finding read against a file
    whose step line no longer calls the helper, or whose origin line no longer holds the value,
    or that is shorter than the step's line, does not."""
    folder = HERE / "programs" / "c_modules"
    config = parse_table({}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1)
    findings = [d for r in results for d in r.diagnostics]
    with_steps = [d for d in findings if any("passes it on" in r.message for r in d.related)]
    assert with_steps

    def real(path: str) -> list[str] | None:
        return _lines(path)

    assert all(chain_holds(d, real) for d in findings)
    d = with_steps[0]
    step = next(r for r in d.related if "passes it on" in r.message)
    origin = next(r for r in d.related if r.origin and r.value)

    def edited(at: Related, text: str) -> Lines:
        def lines_of(path: str) -> list[str] | None:
            lines = list(_lines(path))
            if path == at.location.path:
                lines[at.location.line - 1] = text
            return lines

        return lines_of

    assert not chain_holds(d, edited(step, "    pass"))
    assert not chain_holds(d, edited(origin, "    pass"))
    # the name alone, not called there, is not the call the step says
    assert not chain_holds(d, edited(step, f"    # {step.value} is not called here"))
    assert not chain_holds(d, lambda path: [] if path == step.location.path else _lines(path))
    assert not chain_holds(d, lambda path: None)
    # a field's factory is called by pydantic for each instance: ``default_factory=name``
    # shows the step, a longer name or another attribute does not
    assert chain_holds(d, edited(step, f"    key: str = Field(default_factory={step.value})"))
    assert not chain_holds(d, edited(step, f"    key: str = Field(default_factory={step.value}_x)"))
    assert not chain_holds(d, edited(step, f"    key: str = Field(default_factory={step.value}.a)"))
