"""How many draft tokens a sequence should verify: an acceptance estimate, a cost model and a
back-off after wasted drafts.

**Cost.** A verify pass of ``k`` drafts computes ``k + 1`` rows instead of one. The fused CPU
kernel's int4 products widen each panel of weights once per register tile of rows and reuse it
for every row of the tile (``VERIFY_TILE_ROWS``, 8 rows, on AVX-512 VNNI), so a row more in the
tile costs its multiply-adds, its attention and its LM head row, not another read of the
weights; a ninth row starts a second tile (``verify_cost``). Every product rounds each row's
activations to int16 per group of 32 (row-invariant numerics, so a verify row computes what a
plain step would). Measured on SmolLM2 int4, fused CPU kernel, one torch thread, shared 2-core
VM (Intel Xeon, AVX-512 VNNI), 2026-12-04, at 88dfa4f, steps of each size interleaved in one
request (``benchmarks/engine_speculative.py --verify-cost``), medians of 68-84 steps each,
load average 3.1 before and 5.6 after: a plain step 15.5 ms; 1.25 plain steps for 1 draft,
1.36 for 2, 1.46 for 3, 1.67 for 4, 1.89 for 5, 2.31 for 6, 2.43 for 7, 2.66 for 8, 2.88 for 9
(fitted on 1-5 drafts, the default's range: ``1.05 + 0.16 k``). A pass yields
``1 + a + a^2 + ... + a^k`` tokens on average when each next draft is right with probability
``a`` (given the ones before it were).

**Acceptance.** Each sequence keeps ``a`` as an exponentially weighted count of its verified
draft positions (every position up to and including the first rejection is one trial),
starting from ``PRIOR_ACCEPTED / PRIOR_TRIALS``, and drafts the ``k`` that maximises tokens per
unit of cost (`best_draft_length`); ``k = 0`` when no length promises at least ``MIN_GAIN``
times a plain step's rate (a margin for the estimate's noise and for a verify's cost, which
moves with the machine's load: drafting starts at ``a`` about 0.33, not 0.21). While it does
not draft, each step still checks the first token of the draft it would have made against the
token the model produced (a free trial), so the estimate recovers when the text turns to
copying again.

**Back-off** (`DraftBackoff`). The estimate alone lets natural text flap: one lucky free trial
lifts it over the threshold, the next draft is rejected at its first token, and each such
verify costs ``verify_cost(k) - 1`` steps for nothing. So a verify that keeps none of its
drafts pauses the sequence's drafting for ``BACKOFF_BASE_STEPS`` decode steps, doubled for each
further wasted verify in a row, up to ``BACKOFF_MAX_STEPS``; a verify that keeps at least one
draft (which pays: two tokens or more for one pass that costs less than two steps) ends the
streak. Free trials go on during a pause. Over a 128-token chat answer this bounds the waste
to a handful of verifies (pauses 2, 4, 8, 16, 32, 64 steps), while a copying sequence, whose
drafts keep tokens, never pauses for more than a step or two after the point where its copy
diverges.
The same idea as llama.cpp's n-gram cache, which drafts only continuations seen often enough
(``draft_min_sample_size_*`` / ``draft_min_percent_*`` in ``common/ngram-cache.cpp``), and
Hugging Face transformers' ``num_assistant_tokens_schedule="heuristic"`` (2 more draft tokens
after a fully accepted draft, 1 fewer otherwise); both checked 2026-12-03.
"""

from __future__ import annotations

__all__ = [
    "BACKOFF_BASE_STEPS",
    "BACKOFF_MAX_STEPS",
    "DECAY",
    "MIN_GAIN",
    "PRIOR_ACCEPTED",
    "PRIOR_TRIALS",
    "VERIFY_COST_FIRST_TILE",
    "VERIFY_COST_PER_TILE",
    "VERIFY_COST_PER_TOKEN",
    "VERIFY_TILE_ROWS",
    "AcceptanceEstimate",
    "DraftBackoff",
    "best_draft_length",
    "verify_cost",
]

VERIFY_TILE_ROWS = 8
"""Rows the fused CPU kernel's int4 products take per register tile on AVX-512 VNNI
(``VNNI_TILE_MAX`` in ``engine/cpu_decode/decode_step.c``; AVX2 tiles hold up to 5)."""

VERIFY_COST_FIRST_TILE = 0.05
"""Extra cost of a verify pass over a plain step, besides its draft rows, in decode steps."""

VERIFY_COST_PER_TOKEN = 0.16
"""Extra cost per draft token verified (its row's products, attention, LM head and sampling)."""

VERIFY_COST_PER_TILE = 0.34
"""Extra cost of each further tile of `VERIFY_TILE_ROWS` rows, in decode steps."""

DECAY = 0.9
"""Weight of the past per trial (an effective memory of about 10 trials)."""

MIN_GAIN = 1.1
"""Expected tokens per unit of cost a draft must promise, over a plain step's 1."""

PRIOR_ACCEPTED = 1.2
PRIOR_TRIALS = 2.0
"""The estimate before any trial: 1.2 of 2 (0.6, above the 0.33 where drafting starts), so a new
sequence drafts a few tokens."""

BACKOFF_BASE_STEPS = 2
"""Decode steps without drafts after a first wasted verify (one that kept no draft)."""

BACKOFF_MAX_STEPS = 64
"""The longest pause, reached after 6 wasted verifies in a row."""


def verify_cost(num_drafts: int) -> float:
    """Cost of a decode step that verifies ``num_drafts`` drafts, in plain decode steps.

    Returns:
        1.0 for no draft; ``1 + VERIFY_COST_FIRST_TILE + VERIFY_COST_PER_TOKEN * num_drafts +
        VERIFY_COST_PER_TILE * t`` with ``t`` the tiles of `VERIFY_TILE_ROWS` rows past the
        first that ``num_drafts + 1`` rows fill (1.21 for 1 draft, 1.53 for 3, 1.85 for 5, 2.17
        for 7, 2.67 for 8).

    Raises:
        ValueError: ``num_drafts < 0``.
    """
    if num_drafts < 0:
        raise ValueError(f"a draft has 0 tokens or more, got {num_drafts}")
    if num_drafts == 0:
        return 1.0
    extra_tiles = num_drafts // VERIFY_TILE_ROWS  # ceil((num_drafts + 1) / tile) - 1
    return (
        1.0
        + VERIFY_COST_FIRST_TILE
        + VERIFY_COST_PER_TOKEN * num_drafts
        + VERIFY_COST_PER_TILE * extra_tiles
    )


def best_draft_length(acceptance: float, max_tokens: int) -> int:
    """The draft length in ``0..max_tokens`` with the most expected tokens per unit of cost.

    Args:
        acceptance: the chance ``a`` that a draft token is right given the ones before it.
        max_tokens: the longest draft allowed now.

    Returns:
        ``argmax_k (1 + a + ... + a^k) / verify_cost(k)``; the shortest on ties, 0 when no
        length reaches ``MIN_GAIN``.
    """
    best, best_rate = 0, MIN_GAIN
    expected, power = 1.0, 1.0
    for k in range(1, max_tokens + 1):
        power *= acceptance
        expected += power
        rate = expected / verify_cost(k)
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


class DraftBackoff:
    """One sequence's pause after wasted verifies (see the module doc).

    Attributes:
        wasted_streak: verifies in a row that kept no draft.
        steps_left: decode steps still to go without drafts.
    """

    __slots__ = ("steps_left", "wasted_streak")

    def __init__(self) -> None:
        self.wasted_streak = 0
        self.steps_left = 0

    def allows_draft(self) -> bool:
        """Called once per decode step of the sequence: False while a pause runs (and counts
        this step off it)."""
        if self.steps_left > 0:
            self.steps_left -= 1
            return False
        return True

    def observe(self, num_accepted: int) -> None:
        """Record a verify that kept ``num_accepted`` drafts: 0 starts a pause of
        ``min(BACKOFF_BASE_STEPS * 2^(streak - 1), BACKOFF_MAX_STEPS)`` steps, more ends the
        streak."""
        if num_accepted > 0:
            self.wasted_streak = 0
            return
        self.wasted_streak += 1
        pause = BACKOFF_BASE_STEPS << min(self.wasted_streak - 1, 16)
        self.steps_left = min(pause, BACKOFF_MAX_STEPS)
