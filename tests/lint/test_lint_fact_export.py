"""A fact exported to JSON is recognised as one when the whole-program fixpoint compares two
analyses of a module: a change only in the steps that passed a fact on does not make the
module's importers due again, a change in what the fact is (its role included) does."""

from __future__ import annotations

from promptcache.lint_rules.analysis.exports import fact_to_json
from promptcache.lint_rules.analysis.program import _is_fact, _same_but_chains
from promptcache.lint_rules.facts import ASSUMED, Fact, Kind


def _fact(via: tuple[tuple[str, int, str, str], ...] = (), role: str = "") -> list:
    return fact_to_json(
        Fact(Kind.TIME, 3, 8, "datetime.now()", "subday", via=via, role=role), "app/clock.py"
    )


def test_an_exported_fact_is_recognised() -> None:
    assert _is_fact(_fact())
    assert not _is_fact(["time", 3, 8])


def test_only_the_proven_steps_changing_is_the_same_export() -> None:
    one = _fact(via=(("returned by Clock.now_text", 12, "now_text", ""),))
    other = _fact(via=(("returned by Clock.stamp", 40, "stamp", ""),))
    assert one != other
    assert _same_but_chains({"f": [one]}, {"f": [other]})


def test_an_unseen_step_or_another_role_is_a_change() -> None:
    proven = _fact(via=(("returned by Clock.now_text", 12, "now_text", ""),))
    unseen = _fact(via=((f"{ASSUMED} format()", 12, "format", ""),))
    assert not _same_but_chains([proven], [unseen])
    assert not _same_but_chains([_fact(role="user")], [_fact(role="system")])
