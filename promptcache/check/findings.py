"""What ``promptcache check`` reports: :class:`Finding` and the rule codes it names.

Each finding carries a lint rule code (``promptcache rules``) so a check finding and a lint
finding about the same bug read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from .capture import CallSite
from .perturbation import KIND_LABELS

__all__ = ["CAUSE_LABELS", "CAUSE_RULES", "RULE_TITLES", "UNEXPLAINED", "Finding"]

#: The cause of a difference in which the run shows none of the changes check made (no time,
#: pid or reordering in it, and no draw from random, uuid4 or secrets by the program).
UNEXPLAINED: Final = "unexplained"

#: The rule codes check reports, with the names ``promptcache rules`` gives them.
RULE_TITLES: Final[dict[str, str]] = {
    "PC001": "time-in-prefix",
    "PC002": "unique-id-in-prefix",
    "PC004": "unordered-iteration-in-prompt",
    "PC005": "unsorted-tool-list",
    "PC007": "excess-breakpoints",
    "PC008": "breakpoint-below-minimum",
    "PC011": "model-varies-in-session",
    "PC013": "unstable-prompt-cache-key",
    "PC014": "invalid-cache-ttl",
    "PC018": "fixed-early-breakpoint",
}
#: Perturbation kind -> the rule a prompt difference it causes corresponds to (order kinds
#: become PC005 when the difference is in the tool list).
CAUSE_RULES: Final[dict[str, str]] = {
    "clock": "PC001",
    "random": "PC002",
    "pid": "PC002",
    "hash_seed": "PC004",
    "listdir": "PC004",
    UNEXPLAINED: "PC002",
}
#: Cause -> how reports name it: the text after "caused by" for a perturbation kind, the
#: whole clause for :data:`UNEXPLAINED`, which no change of check's caused.
CAUSE_LABELS: Final[dict[str, str]] = {
    **KIND_LABELS,
    UNEXPLAINED: (
        "unexplained: none of the changes check made shows in it (a value check does not "
        "change, such as a monotonic clock or a file an earlier run wrote)"
    ),
}


@dataclass(frozen=True)
class Finding:
    """One cache breaker check proved (a difference) or saw (a structure problem).

    Attributes:
        rule: the lint rule code (:data:`RULE_TITLES`).
        check: ``"difference"`` (the cacheable prefix differed between two runs) or
            ``"structure"`` (a request broke a vendor rule by itself).
        causes: the perturbation kinds the difference comes from (``promptcache.check.
            perturbation.KINDS``); more than one only when the runs cannot tell them apart
            (run with ``--isolate``); ``(UNEXPLAINED,)`` when the run shows none of them in
            it; empty for structure findings.
        site: the call site of the request (None when the hook could not report one).
        api: the request's wire format.
        path: JSON path in the request of the difference (``messages[0].content``) or of the
            breakpoint concerned.
        message: one sentence saying what is wrong.
        before, after: excerpts of the differing text in the baseline run and in ``run``
            (None for structure findings).
        run: the perturbed run that showed the difference (0 for structure findings).
        requests: how many requests at this call site showed it, over all the runs.
        seen_in: the runs those requests came from (``(0,)`` for structure findings).
        moved_in: for items found in another order, the list or string that holds them
            (``tools``); where two orders first differ changes from run to run, so repeats
            are merged by this path rather than by ``path``. None otherwise.
    """

    rule: str
    check: Literal["difference", "structure"]
    causes: tuple[str, ...]
    site: CallSite | None
    api: str
    path: str
    message: str
    before: str | None = None
    after: str | None = None
    run: int = 0
    requests: int = 1
    seen_in: tuple[int, ...] = ()
    moved_in: str | None = None

    @property
    def title(self) -> str:
        """The rule's name, e.g. ``time-in-prefix``."""
        return RULE_TITLES[self.rule]

    def key(self) -> tuple[object, ...]:
        """What makes two findings the same one (repeats at one call site are merged)."""
        return (self.site, self.rule, self.check, self.moved_in or self.path, self.causes)
