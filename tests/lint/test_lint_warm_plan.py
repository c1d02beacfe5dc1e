"""A warm run after one edit finds what a run without the cache finds, both ways.

A warm run replays the fixpoint's waves from the cache, and each plan looks again only at
what may have moved since the last one (``Program._plan``: the files given an output, the
files whose resolved names read them, the field stores, the class hierarchy, the symbols
asked, the unsent message classes). A file of a program whose findings need another module's
summary is emptied before the cold run and restored before the warm one (the finding must
come back), and the other way round (it must go); each warm run must equal a run with the
cache off.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lint_markers import program_markers

from promptcache.lint_rules.analysis.program import lint_program
from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.files import discover
from promptcache.lint_rules.registry import KNOWN_CODES

PROGRAMS = Path(__file__).parent / "programs"
#: chains across modules (c), field stores of another module (k, n, z_base_fields_factory),
#: message classes sent or not elsewhere (w_glob_message_class), overrides in subclasses of
#: other modules (z_service_overrides), files forced by a sink function of another module (u)
CASES = [
    "c_modules",
    "k_fields",
    "n_field_registry",
    "u_forced_callers",
    "w_glob_message_class",
    "z_base_fields_factory",
    "z_service_overrides",
]


def _flagged(folder: Path, files: list[str], cache: Path | None) -> set[tuple[str, int, int, str]]:
    config = parse_table({}, folder, KNOWN_CODES)
    results, _ = lint_program(files, config, 1, cache)
    return {
        (Path(r.path).relative_to(folder).as_posix(), d.location.line, d.location.col, d.code)
        for r in results
        for d in r.diagnostics
    }


@pytest.mark.parametrize("name", CASES)
def test_warm_run_after_emptying_or_restoring_a_file_matches_no_cache(
    name: str, tmp_path: Path
) -> None:
    folder = tmp_path / name
    shutil.copytree(PROGRAMS / name, folder)
    want = program_markers(folder)
    files = [str(p) for p in discover([folder], parse_table({}, folder, KNOWN_CODES), False)]
    assert len(files) >= 2
    for number, target in enumerate(map(Path, files)):
        text = target.read_text()
        # restored: the cold run saw the file empty, the warm run sees it again
        cache = tmp_path / f"restore-{number}"
        target.write_text("")
        emptied = _flagged(folder, files, cache)
        target.write_text(text)
        assert _flagged(folder, files, cache) == want, target.name
        # emptied: the cold run saw the file, the warm run sees it empty
        cache = tmp_path / f"empty-{number}"
        assert _flagged(folder, files, cache) == want
        target.write_text("")
        assert _flagged(folder, files, cache) == emptied == _flagged(folder, files, None)
        target.write_text(text)


def test_an_edit_two_modules_away_reaches_the_request_on_a_warm_run(tmp_path: Path) -> None:
    """The time enters a helper that another module's prompt builder calls, and a third
    module sends the prompt: found on the warm run after the edit, and gone after the edit
    back, as a run without the cache finds."""
    folder = tmp_path / "prog"
    folder.mkdir()
    clock = folder / "clock.py"
    fixed = "def stamp():\n    return 'today'\n"
    live = "import datetime\n\n\ndef stamp():\n    return datetime.datetime.now().isoformat()\n"
    clock.write_text(fixed)
    (folder / "prompts.py").write_text(
        "from clock import stamp\n\n\ndef system():\n    return f'You help. {stamp()}'\n"
    )
    (folder / "agent.py").write_text(
        "import anthropic\n\nfrom prompts import system\n\nclient = anthropic.Anthropic()\n\n\n"
        "def ask(q):\n"
        "    return client.messages.create(model='m', max_tokens=9, system=system(),\n"
        "                                  messages=[{'role': 'user', 'content': q}])\n"
    )
    files = [str(folder / n) for n in ("agent.py", "clock.py", "prompts.py")]
    cache = tmp_path / "cache"
    assert _flagged(folder, files, cache) == set()
    clock.write_text(live)
    found = _flagged(folder, files, cache)
    assert {(f, c) for f, _, _, c in found} == {("agent.py", "PC001")}
    assert found == _flagged(folder, files, None)
    clock.write_text(fixed)
    assert _flagged(folder, files, cache) == set() == _flagged(folder, files, None)
