"""How many draft tokens a sequence should verify: an acceptance estimate and a cost model.

A verify pass of ``k`` drafts computes ``k + 1`` rows instead of one. On a memory-bound CPU
decode the weights are read once either way, but the pass switches from the one-row kernel to
the multi-row one, and the LM head's cost grows with its rows, so a pass costs about
``1 + COST_FIXED + COST_PER_TOKEN * k`` plain decode steps (SmolLM2 int4 through the fused CPU
kernel, one thread, shared 2-core VM, 2026-12-03: a step of one row 31 ms, of two 43 ms; the
int8 LM head alone 10.5 ms for one row, 14 for three, 23 for four, 36 for six). It yields
``1 + a + a^2 + ... + a^k`` tokens on average when each next draft is right with probability
``a`` (given the ones before it were).

Each sequence keeps ``a`` as an exponentially weighted count of its verified draft positions
(every position up to and including the first rejection is one trial), starting from
``PRIOR_ACCEPTED / PRIOR_TRIALS``, and drafts the ``k`` that maximises tokens per unit of
cost; ``k = 0`` when no length pays, which is how natural text with chance n-gram matches
keeps plain decode speed. While it does not draft, each step still checks the first token of
the draft it would have made against the token the model produced (a free trial), so the
estimate recovers when the text turns to copying again.
"""

from __future__ import annotations

__all__ = [
    "COST_FIXED",
    "COST_PER_TOKEN",
    "DECAY",
    "PRIOR_ACCEPTED",
    "PRIOR_TRIALS",
    "AcceptanceEstimate",
    "best_draft_length",
]

COST_FIXED = 0.35
"""Extra cost of a verify pass over a plain decode step, in decode steps (see module doc)."""

COST_PER_TOKEN = 0.15
"""Extra cost per draft token verified, in decode steps."""

DECAY = 0.9
"""Weight of the past per trial (an effective memory of about 10 trials)."""

PRIOR_ACCEPTED = 1.0
PRIOR_TRIALS = 2.0
"""The estimate before any trial: 1 of 2, so a new sequence drafts a few tokens."""


def best_draft_length(acceptance: float, max_tokens: int) -> int:
    """The draft length in ``0..max_tokens`` with the most expected tokens per unit of cost.

    Args:
        acceptance: the chance ``a`` that a draft token is right given the ones before it.
        max_tokens: the longest draft allowed now.

    Returns:
        ``argmax_k (1 + a + ... + a^k) / cost(k)``, ``cost(0) = 1`` and ``cost(k) = 1 +
        COST_FIXED + COST_PER_TOKEN * k``; the shortest on ties.
    """
    best, best_rate = 0, 1.0
    expected, power = 1.0, 1.0
    for k in range(1, max_tokens + 1):
        power *= acceptance
        expected += power
        rate = expected / (1.0 + COST_FIXED + COST_PER_TOKEN * k)
        if rate > best_rate:
            best, best_rate = k, rate
    return best


class AcceptanceEstimate:
    """One sequence's exponentially weighted draft acceptance (``a`` above)."""

    __slots__ = ("accepted", "trials")

    def __init__(self) -> None:
        self.accepted = PRIOR_ACCEPTED
        self.trials = PRIOR_TRIALS

    @property
    def rate(self) -> float:
        """The estimate of ``a``, in (0, 1)."""
        return self.accepted / self.trials

    def observe(self, num_accepted: int, num_drafted: int) -> None:
        """Record a verified draft: ``num_accepted`` of its ``num_drafted`` tokens were right
        (one trial per accepted token, plus one failed trial when it stopped short)."""
        for _ in range(num_accepted):
            self.accepted = DECAY * self.accepted + 1.0
            self.trials = DECAY * self.trials + 1.0
        if num_accepted < num_drafted:
            self.accepted = DECAY * self.accepted
            self.trials = DECAY * self.trials + 1.0
