"""What an analysis leaves behind is freed by reference counting, not by the cyclic collector:
applying a summary at a call (``CallsMixin.call_bound``) leaves no cycle of its closures, and
``facts.canonical``'s memo of canonical fact sets is emptied after each analysis. (The
program driver collects the garbage before every analysis, ``program._fresh_heap``: each
object left in a cycle is traced there once more.)"""

from __future__ import annotations

import ast
import gc

from analysis_outcome import FILES, analyse

from promptcache.lint_rules.config import LintConfig
from promptcache.lint_rules.facts import _CANONICAL, Fact, Kind, canonical
from promptcache.lint_rules.runner import analyse_source
from promptcache.lint_rules.taint import Analyzer


def _cycles_left(path_index: int) -> list[str]:
    """The qualified names of the functions found in garbage cycles after analysing
    ``FILES[path_index]``."""
    path = FILES[path_index]
    raw = path.read_bytes()
    tree = ast.parse(raw)
    gc.collect()
    gc.disable()
    flags = gc.get_debug()
    try:
        analyse(Analyzer, tree, raw, path)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return [o.__qualname__ for o in gc.garbage if type(o).__name__ == "function"]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        gc.enable()


def test_applying_summaries_leaves_no_closure_cycle() -> None:
    # the test programs of methods and of modules: calls of functions with summaries
    programs = [
        i
        for i, path in enumerate(FILES)
        if "programs" in path.parts and {"a_methods", "c_modules"} & set(path.parts)
    ]
    assert len(programs) >= 5
    for index in programs:
        left = _cycles_left(index)
        assert not [name for name in left if "call_bound" in name], FILES[index]


def test_canonical_returns_the_set_it_is_given_and_forgets_after_an_analysis() -> None:
    a = Fact(Kind.TIME, 1, 0, "time.time()")
    b = Fact(Kind.UNIQUE, 2, 0, "uuid4()")
    first = frozenset({a, b})
    assert canonical(first) is first
    again = frozenset([a, b])  # an equal set, another object: returned as it is too
    assert again is not first and canonical(again) is again
    longer = a.passed_on(("returned by f", 3, "f", ""))
    both = frozenset({a, longer, b})
    assert canonical(both) == first  # the shorter chain of one origin is kept
    analyse_source(b"import time\nx = time.time()\n", "m.py", LintConfig(), requests=("x",))
    assert not _CANONICAL
