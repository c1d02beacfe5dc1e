"""What a caller's argument facts become for a callee's parameter fact (``calls.CallsMixin.passed``)
is kept for the rest of the analysis (``passed_memo``), and so is, for one call, what each
parameter fact named in a summary becomes: a module analysed so gives the same prefix entries,
sink calls, breakpoint calls, wanted names and exports as when each is computed afresh. Run on
every test program and on the linter's own modules, and the kept answers must be used."""

from __future__ import annotations

import ast

from analysis_outcome import FILES, analyse

from promptcache.lint_rules.calls import with_grain
from promptcache.lint_rules.facts import Fact, Step, passed_role
from promptcache.lint_rules.taint import Analyzer


class Afresh(Analyzer):
    """Computes each ``passed`` answer again, keeping none."""

    def passed(
        self, given: frozenset[Fact], grain: str, steps: tuple[Step, ...], role: str
    ) -> frozenset[Fact]:
        out = with_grain(given, grain)
        if steps:
            out = self.unproven_all(out, steps)
        return passed_role(out, role)


class Counting(Analyzer):
    """Counts the ``passed`` answers found kept."""

    hits = 0

    def passed(
        self, given: frozenset[Fact], grain: str, steps: tuple[Step, ...], role: str
    ) -> frozenset[Fact]:
        if (given, grain, steps, role) in self.passed_memo:
            self.hits += 1
        return super().passed(given, grain, steps, role)


def test_kept_answers_give_what_computing_them_again_gives() -> None:
    assert len(FILES) > 50
    hits = 0
    for path in FILES:
        raw = path.read_bytes()
        # one tree for both: facts name functions by the id of their node
        tree = ast.parse(raw)
        again, _ = analyse(Afresh, tree, raw, path)
        kept, counting = analyse(Counting, tree, raw, path)
        assert kept == again, path
        assert isinstance(counting, Counting)
        hits += counting.hits
    assert hits > 100
