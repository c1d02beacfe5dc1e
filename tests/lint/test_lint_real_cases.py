"""Real prompt-cache bugs from public repositories, replayed through our own reproductions.

``real_cases.toml`` lists public fix commits (and their parents) where a time value, a random id,
an unstable order, a fifth cache breakpoint or an unstable ``prompt_cache_key`` broke a vendor
prompt cache. Each case has an invented reproduction of the same shape under
``real_cases/<slug>/bad/`` and ``fixed/``, each linted as one program (a folder of modules). The
bad side's findings of the case's rule must equal its inline markers (``# PC001: 13``, as in
``lint_markers``); the fixed side must have none. Cases with ``found_by_linter = false`` are
shapes the current analysis misses; they run as strict xfails, so flip the field once they pass.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from lint_markers import program_markers as _markers

from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

HERE = Path(__file__).parent
CASES_FILE = HERE / "real_cases.toml"
FIELDS = {
    "id": str,
    "repo": str,
    "fix_commit": str,
    "bug_commit": str,
    "file": str,
    "rule": str,
    "shape": str,
    "why": str,
    "repro": str,
    "found_by_linter": bool,
}
_SHA = re.compile(r"[0-9a-f]{40}")
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _load() -> list[dict]:
    with CASES_FILE.open("rb") as handle:
        return tomllib.load(handle)["case"]


CASES = _load()


def _findings(folder: Path, rule: str) -> set[tuple[str, int, int, str]]:
    """(path relative to folder, line, column, code) of ``rule``'s findings on the whole folder."""
    config = parse_table({"select": [rule]}, folder, KNOWN_CODES)
    found = set()
    for result in lint_paths([folder], config, jobs=1):
        rel = Path(result.path).resolve().relative_to(folder.resolve()).as_posix()
        for d in result.diagnostics:
            if d.code == rule:
                found.add((rel, d.location.line, d.location.col, d.code))
    return found


def _param(case: dict):
    marks = []
    if not case.get("found_by_linter", True):
        reason = f"{case['rule']} does not find this shape yet: {case['shape']}"
        marks.append(pytest.mark.xfail(strict=True, reason=reason))
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_side_flags_the_marked_lines_and_fixed_side_is_clean(case: dict) -> None:
    root = HERE / case["repro"]
    bad, fixed = _findings(root / "bad", case["rule"]), _findings(root / "fixed", case["rule"])
    want = _markers(root / "bad")
    assert bad == want, f"unexpected: {sorted(bad - want)}\nmissing: {sorted(want - bad)}"
    assert not fixed, f"fixed side still flagged: {sorted(fixed)}"


def test_real_cases_toml_is_well_formed() -> None:
    assert len(CASES) >= 10
    ids = [case.get("id") for case in CASES]
    assert len(ids) == len(set(ids)), f"duplicate ids: {sorted(i for i in ids if ids.count(i) > 1)}"
    for case in CASES:
        name = case.get("id", "?")
        assert set(case) == set(FIELDS), f"{name}: fields {sorted(set(case) ^ set(FIELDS))}"
        for key, kind in FIELDS.items():
            assert isinstance(case[key], kind), f"{name}: {key} is not {kind.__name__}"
            assert kind is bool or case[key].strip(), f"{name}: {key} is empty"
        assert _REPO.fullmatch(case["repo"]), f"{name}: repo {case['repo']!r}"
        for key in ("fix_commit", "bug_commit"):
            assert _SHA.fullmatch(case[key]), f"{name}: {key} is not 40 hex digits"
        assert case["fix_commit"] != case["bug_commit"], name
        assert case["rule"] in KNOWN_CODES, f"{name}: unknown rule {case['rule']}"
        root = HERE / case["repro"]
        assert case["repro"] == f"real_cases/{root.name}", f"{name}: repro outside real_cases/"
        for side in ("bad", "fixed"):
            assert list((root / side).glob("*.py")), f"{name}: no modules in {side}/"
        codes = {code for _, _, _, code in _markers(root / "bad")}
        assert codes == {case["rule"]}, f"{name}: bad/ markers are {sorted(codes)}"
        assert not _markers(root / "fixed"), f"{name}: fixed/ must not carry markers"
