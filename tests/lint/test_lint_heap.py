"""What the program driver keeps between analyses is freed when it is no longer kept, and the
collector's passes over a new tree are spared: a tree that ``parse.parse_kept`` no longer keeps
is freed by its reference count (it may be out of the collector's sight, ``gc.freeze``), and in
a process whose analyses each start with ``program._fresh_heap`` a new tree is built with the
collector paused, then frozen with the garbage collected first (``program.parsing``)."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import pytest

from promptcache.lint_rules import parse
from promptcache.lint_rules.analysis import program
from promptcache.lint_rules.config import LintConfig
from promptcache.lint_rules.nodes import all_nodes
from promptcache.lint_rules.parse import parse_kept
from promptcache.lint_rules.runner import _line_reader


def test_a_tree_no_longer_kept_is_freed_by_its_reference_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = "def kept_then_dropped():\n    return [1, 2, 3]\n"
    second = "dropping_the_first = 2\n"
    monkeypatch.setattr(parse, "TREES_KEPT_BYTES", len(first) + len(second) - 1)
    tree = parse_kept(first, "first.py")
    # the list of its nodes kept on the tree holds the tree itself
    assert all_nodes(tree)[0] is tree and len(all_nodes(tree)) > 5
    assert parse_kept(first, "first.py") is tree
    assert sys.getrefcount(tree) > 2  # held by the kept trees too
    parse_kept(second, "second.py")  # the first no longer fits beside it
    # only ``tree`` (and getrefcount's argument) hold it: no cycle through its node list
    assert sys.getrefcount(tree) == 2
    assert parse_kept(first, "first.py") is not tree  # parsed again


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _parse_in_freezing_process(source: str) -> tuple[bool, int, bool]:
    """``parse_kept`` inside ``parsing()`` as in a worker process (``_init_worker(...,
    freeze_each=True)``): (collector on during the parse, objects frozen after it, a cycle
    made before it still alive); the process is left as found."""
    gc.collect()
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    thresholds = gc.get_threshold()
    program._init_worker(LintConfig(), None, freeze_each=True)
    try:
        cycle = weakref.ref(_Cycle())
        assert cycle() is not None  # garbage the reference count cannot free
        with program.parsing():
            enabled = gc.isenabled()
            parse_kept(source, "module.py")
        return enabled, gc.get_freeze_count(), cycle() is not None
    finally:
        gc.unfreeze()
        program._init_worker(LintConfig())
        gc.set_threshold(*thresholds)


def test_a_new_tree_is_parsed_with_the_collector_paused_then_frozen_without_garbage() -> None:
    source = "".join(f"def new_tree_{i}(a, b):\n    return a + b * {i}\n" for i in range(200))
    enabled, frozen, cycle_alive = _parse_in_freezing_process(source)
    assert not enabled and gc.isenabled()
    assert frozen > 200 * 10  # the tree's nodes, and what else was alive
    assert not cycle_alive  # collected before the freeze, not kept out of sight
    # the same source again: its tree is kept, nothing new to freeze
    enabled, frozen, cycle_alive = _parse_in_freezing_process(source)
    assert not enabled and frozen == 0 and cycle_alive


def test_parsing_elsewhere_leaves_the_collector_alone() -> None:
    gc.collect()
    assert gc.get_freeze_count() == 0
    with program.parsing():
        assert gc.isenabled()
        parse_kept("".join(f"elsewhere_{i} = {i}\n" for i in range(500)), "module.py")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_line_reader_splits_the_file_itself_from_its_text_and_reads_others(
    tmp_path: Path,
) -> None:
    other = tmp_path / "other.py"
    other.write_text("a = 1\r\nb = 2\n")
    lines_of = _line_reader("module.py", "x = 1\ny = 2\n")
    assert lines_of("module.py") == ["x = 1", "y = 2"]
    assert lines_of(str(other)) == ["a = 1", "b = 2"]
    assert lines_of(str(tmp_path / "missing.py")) is None
    other.write_text("changed = 1\n")
    assert lines_of(str(other)) == ["a = 1", "b = 2"]  # read once
