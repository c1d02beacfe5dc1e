"""The six cache breakers of programs/bad.py, each found with its cause named, and silence on
their fixed look-alikes (programs/fixed.py) and on a conversation whose tail changes every turn:
real child processes through the official clients."""

from __future__ import annotations

from pathlib import Path

import pytest
from check_support import PROGRAMS, by_function, check_program

from promptcache.check.output import render
from promptcache.check.runner import CheckResult

#: function in bad.py -> (rule, path of the difference, cause under --isolate). The isolated run
#: takes the OpenAI cases only (a child importing the anthropic client costs seconds, six runs
#: of it too many); the default run below takes every case.
EXPECTED = {
    "clock_chat": ("PC001", "messages[0].content", ("clock",)),
    "tools_set": ("PC005", "tools[0].function.name", ("hash_seed",)),
    "skills": ("PC004", "messages[0].content", ("listdir",)),
    "cache_key": ("PC013", "prompt_cache_key", ("random",)),
    "few_shot": ("PC002", "instructions", ("random",)),
}


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> CheckResult:
    result, _ = check_program(
        tmp_path_factory.mktemp("isolated"), "bad.py", *EXPECTED, isolate=True
    )
    return result


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> CheckResult:
    """One pair of runs over both.py: bad.py's seven cases, then fixed.py's look-alikes."""
    result, _ = check_program(tmp_path_factory.mktemp("default"), "both.py")
    return result


def _in(result: CheckResult, name: str) -> CheckResult:
    """``result`` with only the findings whose call site is in programs/NAME."""
    kept = [f for f in result.findings if f.site is not None and Path(f.site.path).name == name]
    return CheckResult(result.command, result.runs, kept, result.notes)


@pytest.mark.parametrize("function", sorted(EXPECTED))
def test_each_breaker_is_found_with_its_cause(isolated: CheckResult, function: str) -> None:
    rule, path, causes = EXPECTED[function]
    [finding] = by_function(isolated)[function]
    assert (finding.rule, finding.path, finding.causes) == (rule, path, causes)
    assert finding.site is not None
    assert Path(finding.site.path) == PROGRAMS / "bad.py"
    line = (PROGRAMS / "bad.py").read_text().splitlines()[finding.site.line - 1]
    assert "client." in line  # the call itself, not a library frame


def test_isolate_runs_each_kind_once_and_finds_nothing_else(isolated: CheckResult) -> None:
    assert [r.perturbation.changed for r in isolated.runs] == [
        (),
        ("clock",),
        ("hash_seed",),
        ("random",),
        ("listdir",),
        ("pid",),
    ]
    assert sorted(by_function(isolated)) == sorted(EXPECTED)
    assert len(isolated.findings) == len(EXPECTED)
    # bad.py sends one request per case; every run captured all five
    assert [sum(1 for q in r.requests if q.api) for r in isolated.runs] == [5] * 6
    assert isolated.exit_code == 1


def test_one_perturbed_run_names_causes_from_the_evidence(default: CheckResult) -> None:
    found = {
        name: [(f.rule, f.causes) for f in fs]
        for name, fs in by_function(_in(default, "bad.py")).items()
    }
    assert found == {
        "clock": [("PC001", ("clock",))],  # through two modules into Anthropic's `system`
        "clock_chat": [("PC001", ("clock",))],
        # no directory listed by the user's code yet: only the hash seed can reorder a set
        "tools_set": [("PC005", ("hash_seed",))],
        "skills": [("PC004", ("hash_seed", "listdir"))],
        "cache_key": [("PC013", ("random",))],
        "few_shot": [("PC002", ("random",))],
        "breakpoints": [("PC007", ())],
    }
    [five] = by_function(default)["breakpoints"]
    assert five.path == "system[4]" and "5 cache breakpoints" in five.message
    text = render(default, "text")
    assert "caused by the wall clock" in text
    # bad.py: 7 requests; fixed.py: 6 single requests and a conversation of 3 turns
    assert [sum(1 for q in r.requests if q.api) for r in default.runs] == [16, 16]
    assert "16 LLM request(s) captured" in text
    assert text.rstrip().endswith("promptcache check: 7 findings in 2 runs")


def test_fixed_look_alikes_and_a_growing_conversation_are_silent(default: CheckResult) -> None:
    assert len(default.findings) == len(_in(default, "bad.py").findings) == 7
    assert _in(default, "fixed.py").findings == []
    assert default.notes == []
