"""An analysis the program driver does not run again because nothing it read changed
(``analysis.reads``, ``Program._reused``) would have given the output it takes instead.

Each taken output is checked against the analysis run after all, on every test program; the
results equal those of a run that takes none, and some are taken. An invented module shows
each side: a class it is given gains a method summary the module never calls (what it read is
the same) or the method it calls changes (what it read changed, and so does its output)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from promptcache.lint_rules.analysis.program import (
    FileState,
    Program,
    Task,
    _init_worker,
    _run_task,
)
from promptcache.lint_rules.analysis.reads import InputReads, same_where_read
from promptcache.lint_rules.config import LintConfig, parse_table
from promptcache.lint_rules.files import discover
from promptcache.lint_rules.registry import KNOWN_CODES

PROGRAMS = Path(__file__).resolve().parent / "programs"
FOLDERS = sorted(p for p in PROGRAMS.iterdir() if p.is_dir())
#: an exported fact (``exports.fact_to_json``): the time of day, made at line 3
TIME_FACT = ["time", 3, 8, "time.time()", "subday", False, -1, "", [], ""]


class Checking(Program):
    """Runs each analysis it takes from the file's last one anyway, and keeps both."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.checked: list[tuple[str, bool]] = []

    def _reused(self, state: FileState, task: Task) -> dict[str, Any] | None:
        taken = super()._reused(state, task)
        if taken is not None:
            _init_worker(self.config, self._rewrites)
            output, _ = _run_task(task)
            self.checked.append((task.path, output == taken))
        return taken


class Running(Program):
    """Takes no output again: runs every analysis the schedule asks for."""

    def _reused(self, state: FileState, task: Task) -> dict[str, Any] | None:
        return None


def _files(folder: Path) -> tuple[list[str], LintConfig]:
    config = parse_table({}, folder, KNOWN_CODES)
    return [str(p) for p in discover([folder], config, False)], config


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_taken_outputs_are_what_the_analysis_gives(folder: Path) -> None:
    files, config = _files(folder)
    checking = Checking(files, config, 1)
    results = checking.run()
    assert all(same for _, same in checking.checked), checking.checked
    assert checking.reused == len(checking.checked)
    running = Running(files, config, 1)
    assert running.run() == results
    assert running.reused == 0
    assert running.analysed == checking.analysed + checking.reused


def test_some_outputs_are_taken_again() -> None:
    taken = 0
    for folder in FOLDERS:
        files, config = _files(folder)
        program = Program(files, config, 1)
        program.run()
        taken += program.reused
    assert taken > 0


def _class_blob(methods: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "class",
        "module": "app.store",
        "name": "Store",
        "data": {"methods": methods, "default_repr": False},
    }


def _analysed_with(tmp_path: Path, methods: dict[str, Any]) -> tuple[dict[str, Any], InputReads]:
    """Analyse an invented module that calls ``Store().load()`` given ``Store`` with
    ``methods`` (method name -> exported summary)."""
    source = textwrap.dedent(
        """
        from app.store import Store

        def answer(client, question):
            system = Store().load()
            return client.messages.create(system=system, messages=[question])
        """
    )
    path = tmp_path / "agent.py"
    path.write_text(source)
    config = LintConfig()
    _init_worker(config)
    task = Task(str(path), "app.agent", False, {"app.store.Store": _class_blob(methods)}, (), False)
    return _run_task(task)


def _summary(name: str, facts: list[Any]) -> dict[str, Any]:
    return {
        "name": name,
        "params": [],
        "ret": {"facts": facts, "shape": "unknown"},
        "param_sinks": {},
        "stores": {},
        "attr_sinks": {},
        "builder": False,
    }


def test_a_method_the_module_never_calls_is_not_read(tmp_path: Path) -> None:
    load = _summary("Store.load", [])
    output, reads = _analysed_with(tmp_path, {"load": load})
    assert reads.methods.get("app.store.Store") == {"__init__", "load"}
    old = {"app.store.Store": _class_blob({"load": load})}
    # the class gained a method that returns the time: the module never calls it
    clock = _summary("Store.stamp", [TIME_FACT])
    new = {"app.store.Store": _class_blob({"load": load, "stamp": clock})}
    assert same_where_read(old, new, output["wanted"], reads)


def test_a_method_the_module_calls_is_read(tmp_path: Path) -> None:
    load = _summary("Store.load", [])
    output, reads = _analysed_with(tmp_path, {"load": load})
    old = {"app.store.Store": _class_blob({"load": load})}
    # the method it calls now returns the time
    timed = _summary("Store.load", [TIME_FACT])
    new = {"app.store.Store": _class_blob({"load": timed})}
    assert not same_where_read(old, new, output["wanted"], reads)
    # and a module given it finds what it reads changed
    changed, _ = _analysed_with(tmp_path, {"load": timed})
    assert changed["result"] != output["result"]
