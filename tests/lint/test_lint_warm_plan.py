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

import os
import shutil
from pathlib import Path

import pytest
from lint_markers import program_markers

from promptcache.lint_rules.analysis.cache import LintCache, digest
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


def test_an_edit_of_one_of_two_modules_an_importer_reads_moves_only_its_names(
    tmp_path: Path,
) -> None:
    """A prompt module reads a name of each of two modules, and a plan looks again only at
    the names that read a module given a new output: the edited module's time is found (and
    gone after the edit back) at its own request, while the other module's time stays found
    at the other request, as a run without the cache finds."""
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "clock.py").write_text(
        "import datetime\n\n\ndef stamp():\n    return datetime.datetime.now().isoformat()\n"
    )
    labels = folder / "labels.py"
    fixed = "def label():\n    return 'v1'\n"
    live = "import time\n\n\ndef label():\n    return str(time.time())\n"
    labels.write_text(fixed)
    (folder / "prompts.py").write_text(
        "from clock import stamp\nfrom labels import label\n\n\n"
        "def system():\n    return f'You help. {stamp()}'\n\n\n"
        "def other():\n    return f'You check. {label()}'\n"
    )
    (folder / "agent.py").write_text(
        "import anthropic\n\nfrom prompts import other, system\n\n"
        "client = anthropic.Anthropic()\n\n\n"
        "def ask(q):\n"
        "    return client.messages.create(model='m', max_tokens=9, system=system(),\n"
        "                                  messages=[{'role': 'user', 'content': q}])\n\n\n"
        "def check(q):\n"
        "    return client.messages.create(model='m', max_tokens=9, system=other(),\n"
        "                                  messages=[{'role': 'user', 'content': q}])\n"
    )
    files = [str(folder / n) for n in ("agent.py", "clock.py", "labels.py", "prompts.py")]
    cache = tmp_path / "cache"
    one = _flagged(folder, files, cache)
    assert {(f, c) for f, _, _, c in one} == {("agent.py", "PC001")}
    assert one == _flagged(folder, files, None)
    labels.write_text(live)
    both = _flagged(folder, files, cache)
    assert both > one and len({line for _, line, _, _ in both}) == 2
    assert both == _flagged(folder, files, None)
    labels.write_text(fixed)
    assert _flagged(folder, files, cache) == one == _flagged(folder, files, None)


def test_a_cache_entry_is_named_by_the_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry of a file named relative to the working folder is that of its absolute
    path (``os.path.abspath``'s answer, the working folder read once per run), so a run that
    names the file either way finds the entry."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    cache = LintCache.open(tmp_path / "cache", "v")
    for name in ("pkg/m.py", "./pkg/../pkg/m.py", "pkg//m.py", str(tmp_path / "pkg" / "m.py")):
        expected = f"{digest(os.fsencode(os.path.abspath(name)))}.json"
        assert cache._file(name) == os.path.join(str(tmp_path / "cache" / "lint-v"), expected)
    cache.put("pkg/m.py", "c1", "inputs", {"result": 1})
    cache.flush()
    again = LintCache.open(tmp_path / "cache", "v")
    assert again.get(str(tmp_path / "pkg" / "m.py"), "c1", "inputs") is None  # another path text
    assert again.get("pkg/m.py", "c1", "inputs") == {"result": 1}
