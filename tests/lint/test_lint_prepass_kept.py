"""The summaries the class pre-pass keeps for the recording pass (``taint.Analyzer._take``)
change nothing: a module analysed with them gives the same prefix entries, sink calls,
breakpoint calls, wanted names and exports as when every summary the recording pass asks for
is computed again. Run on every test program and on the linter's own modules (real classes
whose methods read, store and call each other), and some summaries must be taken."""

from __future__ import annotations

import ast

from analysis_outcome import FILES, analyse

from promptcache.lint_rules.taint import Analyzer, Summary


class Recomputing(Analyzer):
    """Takes none of the pre-pass's summaries: the recording pass computes each again."""

    def _take(self, func: ast.AST) -> Summary | None:
        return None


class Counting(Analyzer):
    """Counts the pre-pass's summaries that the recording pass takes."""

    taken = 0

    def _take(self, func: ast.AST) -> Summary | None:
        found = super()._take(func)
        if found is not None:
            self.taken += 1
        return found


def test_kept_summaries_give_what_computing_them_again_gives() -> None:
    assert len(FILES) > 50
    taken = 0
    for path in FILES:
        raw = path.read_bytes()
        # one tree for both: facts name functions by the id of their node
        tree = ast.parse(raw)
        again, _ = analyse(Recomputing, tree, raw, path)
        kept, counting = analyse(Counting, tree, raw, path)
        assert kept == again, path
        assert isinstance(counting, Counting)
        taken += counting.taken
    assert taken > 100
