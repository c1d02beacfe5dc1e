"""Whole-program cases (tests/lint/programs/): each folder is linted as one program.

The flagged set of (file, line, column, code) must equal the inline markers of all its files,
with the cache off, with a cold cache, and again with the warm cache.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from lint_markers import program_markers as _markers

from promptcache.lint_rules.config import LintConfig, parse_table
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

PROGRAMS = Path(__file__).parent / "programs"
CASES = sorted(p for p in PROGRAMS.iterdir() if p.is_dir())


def _flagged(folder: Path, cache_dir: Path | None) -> set[tuple[str, int, int, str]]:
    config = parse_table({}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1, cache_dir=cache_dir)
    return {
        (
            Path(d.location.path).resolve().relative_to(folder.resolve()).as_posix(),
            d.location.line,
            d.location.col,
            d.code,
        )
        for r in results
        for d in r.diagnostics
    }


@pytest.mark.parametrize("folder", CASES, ids=lambda p: p.name)
def test_program_flags_exactly_the_marked_lines(folder: Path, tmp_path: Path) -> None:
    want = _markers(folder)
    for cache_dir in (None, tmp_path / "cache", tmp_path / "cache"):  # off, cold, warm
        got = _flagged(folder, cache_dir)
        assert got == want, f"unexpected: {sorted(got - want)}\nmissing: {sorted(want - got)}"


def test_every_program_has_a_positive() -> None:
    assert all(_markers(folder) for folder in CASES)


def _c_modules_copy(tmp_path: Path) -> tuple[Path, LintConfig, list[str], Path]:
    """A copy of the ``c_modules`` program: its folder, config, files and a cache folder."""
    from promptcache.lint_rules.files import discover

    folder = tmp_path / "prog"
    shutil.copytree(PROGRAMS / "c_modules", folder)
    config = parse_table({}, folder, KNOWN_CODES)
    files = [str(p) for p in discover([folder], config, False)]
    return folder, config, files, tmp_path / "cache"


def test_warm_run_reanalyses_only_what_changed(tmp_path: Path) -> None:
    from promptcache.lint_rules.analysis.program import lint_program

    folder, config, files, cache = _c_modules_copy(tmp_path)
    cold, first = lint_program(files, config, 1, cache)
    assert first.analysed >= len(files)
    warm, second = lint_program(files, config, 1, cache)
    assert second.analysed == 0 and warm == cold
    # a comment in the module that defines the helpers: it, and each module that imports
    # it, are analysed again (their summaries are the same, so nothing further)
    context = folder / "app" / "prompts" / "context.py"
    context.write_text(context.read_text() + "# touched\n")
    again, third = lint_program(files, config, 1, cache)
    assert 1 <= third.analysed < first.analysed
    assert again == cold


def test_warm_run_freezes_cached_outputs_only_while_it_runs(tmp_path: Path) -> None:
    """A warm run takes its cached outputs out of the garbage collector's sight while it runs
    (``gc.freeze``): afterwards nothing is frozen and the collector is as the caller left it,
    on or off; a caller's own frozen objects stay frozen (the run then freezes nothing)."""
    import gc

    from promptcache.lint_rules.analysis.program import lint_program

    _, config, files, cache = _c_modules_copy(tmp_path)
    cold, _ = lint_program(files, config, 1, cache)
    assert gc.get_freeze_count() == 0
    warm, second = lint_program(files, config, 1, cache)
    assert second.analysed == 0 and warm == cold
    _assert_collector_left_as_found(lambda: lint_program(files, config, 1, cache)[0], cold)


def _assert_collector_left_as_found(run: Callable[[], object], want: object) -> None:
    """``run()`` gives ``want`` each time and leaves the garbage collector as it found it: on
    with nothing frozen, off with nothing frozen, and with a caller's own frozen objects still
    frozen (none unfrozen, none added)."""
    import gc

    assert gc.get_freeze_count() == 0 and gc.isenabled()
    gc.disable()
    try:
        assert run() == want
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
    held = [[index] for index in range(100)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert run() == want
        # neither unfrozen nor added to (frozen objects that died were freed)
        assert len(held) <= gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
    assert held[99] == [99]


def test_cold_run_freezes_each_analysis_heap_only_while_it_runs(tmp_path: Path) -> None:
    """A cold run in this process collects the garbage and freezes what is left before each
    analysis (``program._fresh_heap``), and unfreezes it at its end: afterwards nothing is
    frozen and the collector is on; with the collector off, or with a caller's own frozen
    objects, it freezes nothing, and its findings are the same each way."""
    from promptcache.lint_rules.analysis.program import lint_program

    _, config, files, _ = _c_modules_copy(tmp_path)
    cold, first = lint_program(files, config, 1, None)
    assert first.analysed >= len(files)
    _assert_collector_left_as_found(lambda: lint_program(files, config, 1, None)[0], cold)


def test_corrupt_cache_entries_are_misses(tmp_path: Path) -> None:
    folder = PROGRAMS / "b_builder"
    cache = tmp_path / "cache"
    want = _flagged(folder, cache)
    entries = list(cache.rglob("*.json"))
    assert entries
    for entry in entries:
        entry.write_bytes(b"\x00not json")
    assert _flagged(folder, cache) == want
    assert (cache / "CACHEDIR.TAG").is_file()


def test_pooled_waves_match_serial_and_keep_gc_settings(tmp_path: Path) -> None:
    """A program big enough to start worker processes in round 0: its later waves (a few
    analyses each) run in those workers too, and give what a serial run gives; the garbage
    collector's thresholds are the caller's again afterwards."""
    import gc

    from promptcache.lint_rules.analysis.program import SERIAL_LIMIT, lint_program
    from promptcache.lint_rules.files import discover

    folder = tmp_path / "prog"
    shutil.copytree(PROGRAMS / "c_modules", folder)
    for index in range(SERIAL_LIMIT):
        (folder / f"filler_{index:02}.py").write_text(f"VALUE = {index}\n")
    config = parse_table({}, folder, KNOWN_CODES)
    files = [str(p) for p in discover([folder], config, False)]
    before = gc.get_threshold()
    serial, one = lint_program(files, config, 1, None)
    pooled, two = lint_program(files, config, 2, None)
    assert gc.get_threshold() == before
    assert two.rounds == one.rounds >= 1
    assert pooled == serial
    assert sum(len(r.diagnostics) for r in pooled) == len(_markers(PROGRAMS / "c_modules"))


def test_external_class_methods_are_read_on_first_use() -> None:
    """Another module's class: each method's summary is read from its JSON when first looked
    up, once (the same object, so its PARAM facts keep one key), and unknown names are
    missing as from a dict."""
    from promptcache.lint_rules.analysis.exports import LazySummaries, load_externals
    from promptcache.lint_rules.frames import ExternalClass, Summary
    from promptcache.lint_rules.runner import analyse_source

    source = (
        "import time\n\n"
        "class Clock:\n"
        "    def __init__(self, zone):\n"
        "        self.zone = zone\n\n"
        "    def stamp(self, label):\n"
        "        return f'{label} {time.time()}'\n"
    )
    _, exports, _, _ = analyse_source(
        source, "app/clock.py", LintConfig(), module="app.clock", requests=("Clock",)
    )
    data = exports["classes"]["Clock"]
    loaded = load_externals(
        {"app.clock.Clock": {"kind": "class", "data": data, "module": "app.clock", "name": "Clock"}}
    )
    cls = loaded["app.clock.Clock"]
    assert isinstance(cls, ExternalClass) and isinstance(cls.methods, LazySummaries)
    assert sorted(cls.methods) == sorted(data["methods"]) == ["__init__", "stamp"]
    assert len(cls.methods) == 2
    assert cls.methods._read == {}  # nothing read yet
    stamp = cls.methods.get("stamp")
    assert isinstance(stamp, Summary) and stamp.params == ["label"]
    assert cls.methods["stamp"] is stamp and list(cls.methods._read) == ["stamp"]
    assert {f.kind.value for f in stamp.ret.facts} == {"param", "time"}
    assert cls.methods.get("missing") is None and "missing" not in cls.methods
    with pytest.raises(KeyError):
        cls.methods["missing"]


def test_argument_to_a_parameter_sunk_through_an_unseen_call_is_unproven() -> None:
    """z_unseen_param_sinks: the runner's context reaches the instructions only through the
    untyped agent's method, so the run input's id stored in that context is an unproven flow
    (a note, naming that call), not a finding, in the module that calls the runner."""
    folder = PROGRAMS / "z_unseen_param_sinks"
    results = lint_paths([folder], parse_table({}, folder, KNOWN_CODES), jobs=1)
    notes = [
        (Path(r.path).name, n.location.line, n.code, [x.message for x in n.related])
        for r in results
        for n in r.notes
    ]
    assert [(name, line, code) for name, line, code, _ in notes] == [("app.py", 11, "PC002")]
    assert any("assumed to pass through get_instructions()" in m for m in notes[0][3])


def _notes(program: str) -> list[tuple[str, int, str, str]]:
    """The unproven flows (notes) of one program folder, sorted: (file name, line, code, the
    messages of the chain's steps joined by spaces)."""
    folder = PROGRAMS / program
    results = lint_paths([folder], parse_table({}, folder, KNOWN_CODES), jobs=1)
    return sorted(
        (Path(r.path).name, n.location.line, n.code, " ".join(x.message for x in n.related))
        for r in results
        for n in r.notes
    )


def test_value_computed_once_through_an_unseen_call_is_unproven() -> None:
    """z_env_through_unseen_calls: environment values read at import (pinned) reach the system
    text only through a library call (``keyring.get_password``) or a library constructor that a
    helper of another module returns (``crewlib.Member``): each is a note naming that call,
    not a finding, as for a per-request value."""
    notes = _notes("z_env_through_unseen_calls")
    assert [(name, line, code) for name, line, code, _ in notes] == [
        ("bot.py", 19, "PC017"),
        ("team.py", 19, "PC017"),
    ]
    assert "assumed to pass through get_password()" in notes[0][3]
    assert "assumed to pass through Member()" in notes[1][3]


def test_entry_of_a_splatted_parameter_from_a_dict_of_unknown_keys_is_unproven() -> None:
    """z_splat_parameter: a sender that splats its dict parameter into the SDK call
    (``create(**payload)``) sends each key as that keyword; a dict whose keys are not known
    (another dict merged in with ``update``, a dict comprehension that drops empty values) may
    hold the time under any key, so its flow to ``system=`` is a note naming the splat, not a
    finding, also one call further out (an entry stored after the literal under a constant key
    keeps the keys known: a finding, not a note)."""
    notes = _notes("z_splat_parameter")
    assert [(name, line, code) for name, line, code, _ in notes] == [
        ("app.py", 59, "PC001"),
        ("app.py", 97, "PC001"),
    ]
    assert all("assumed to pass through **payload" in note[3] for note in notes)


_NOTES_OF = """
import sys
from pathlib import Path

from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

folder = Path(sys.argv[1])
for result in lint_paths([folder], parse_table({}, folder, KNOWN_CODES), jobs=1):
    for note in result.notes:
        steps = " | ".join(x.message for x in note.related)
        print(Path(result.path).name, note.location.line, note.code, steps)
"""


def test_unproven_flow_names_the_same_unseen_calls_under_every_hash_seed() -> None:
    """z_unseen_steps_order: the relay passes one value as three arguments of the sender, each
    reaching the system text through other unseen calls. Linted in fresh processes under four
    hash seeds (set iteration orders), the one note is the same, naming the fewest unseen
    calls (``keep()``), not whichever of the three was met first."""
    import os
    import subprocess
    import sys

    outputs = set()
    for seed in ("0", "1", "2", "3"):
        done = subprocess.run(
            [sys.executable, "-c", _NOTES_OF, str(PROGRAMS / "z_unseen_steps_order")],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
    (note,) = outputs.pop().splitlines()
    assert note.startswith("app.py 10 PC001 ")
    assert "assumed to pass through keep()" in note
    assert "get()" not in note and "hold()" not in note


_EVERY_PROGRAM = """
import sys
from pathlib import Path

from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

for folder in sorted(p for p in Path(sys.argv[1]).iterdir() if p.is_dir()):
    files = lint_paths([folder], parse_table({}, folder, KNOWN_CODES), jobs=1)
    for result in files:
        print(result.path, result.diagnostics, result.notes)
"""


def test_findings_do_not_depend_on_the_hash_seed() -> None:
    """Every program linted in fresh processes under other hash seeds (set and frozenset
    iteration orders): the same findings, fixes and chains. In z_constructor_sinks,
    teach.py's listing comes back through the agent's fields without its fix; its finding
    keeps the fix of the fact born in the file."""
    import os
    import subprocess
    import sys

    outputs = []
    for seed in ("0", "1", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _EVERY_PROGRAM, str(PROGRAMS)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        outputs.append(done.stdout)
    teach = [
        line
        for line in outputs[0].splitlines()
        if line.split(" ", 1)[0].endswith("z_constructor_sinks/crew/teach.py")
    ]
    assert len(teach) == 1 and "iterate in sorted order" in teach[0]
    for other in outputs[1:]:
        assert other == outputs[0]
