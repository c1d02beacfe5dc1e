"""Prompt lookup: draft tokens from n-gram matches in a sequence's own prompt and output.

For a sequence of tokens ``x[0..L)``, for ``n`` from ``prompt_lookup_max`` down to
``prompt_lookup_min``: take the last ``n`` tokens ``x[L-n..L)``, find their most recent earlier
occurrence ``x[j..j+n)`` (``j + n < L``), and propose the tokens that followed it,
``x[j+n .. min(j+n+k, L))``. The first ``n`` with a match wins, so a longer match is preferred.
This is prompt lookup decoding (Saxena 2023, https://github.com/apoorvumang/prompt-lookup-decoding,
checked 2026-12-03) and vLLM's ``ngram`` method; vLLM and llama.cpp take the earliest occurrence,
here the most recent one is taken, which is where a copy being written out is up to.

Cost: each sequence keeps one dict per n-gram length, ``n-gram -> end of its most recent
occurrence``, extended by the tokens appended since the last call (``prompt_lookup_max -
prompt_lookup_min + 1`` dict writes per token), so a proposal is at most that many dict
lookups whatever the sequence's length. Building the index of a new sequence is linear in its
length. Pure Python, not thread-safe (the scheduler's thread only).
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass

from .config import SpeculativeConfig
from .draft_length import AcceptanceEstimate, DraftBackoff, best_draft_length

__all__ = ["DraftState", "NgramIndex", "NgramProposer"]


class NgramIndex:
    """Most recent occurrence of every n-gram (n in ``[n_min, n_max]``) of a growing token list.

    Args:
        n_min, n_max: the n-gram lengths indexed (1 <= n_min <= n_max).
    """

    __slots__ = ("_n_max", "_n_min", "_tables", "_upto")

    def __init__(self, n_min: int, n_max: int) -> None:
        self._n_min = n_min
        self._n_max = n_max
        # _tables[n - n_min][tuple of n tokens] = e: the n-gram x[e-n..e) occurred last there,
        # followed by x[e].
        self._tables: list[dict[tuple[int, ...], int]] = [{} for _ in range(n_min, n_max + 1)]
        self._upto = 1  # every end e < _upto is indexed

    def propose(self, token_ids: Seq[int], k: int) -> list[int]:
        """Up to ``k`` tokens that followed the most recent earlier occurrence of the longest
        matching suffix n-gram of ``token_ids``; [] without a match.

        ``token_ids`` must extend the list of the previous call (tokens are only appended).
        """
        length = len(token_ids)
        n_min = self._n_min
        # Index every n-gram followed by a known token: ends 1..L-1 (the suffix itself, end L,
        # is what is looked up, so it is never its own match).
        for end in range(self._upto, length):
            for n in range(n_min, min(self._n_max, end) + 1):
                self._tables[n - n_min][tuple(token_ids[end - n : end])] = end
        self._upto = max(self._upto, length)
        if k <= 0:
            return []
        for n in range(min(self._n_max, length - 1), n_min - 1, -1):
            found = self._tables[n - n_min].get(tuple(token_ids[length - n :]))
            if found is not None:
                return list(token_ids[found : min(found + k, length)])
        return []


@dataclass(frozen=True, slots=True)
class DraftState:
    """A snapshot of one sequence's drafting (`NgramProposer.draft_state`).

    Attributes:
        acceptance_rate: the acceptance estimate ``a`` (draft_length.py), in (0, 1).
        wasted_streak: verifies in a row that kept no draft.
        pause_steps_left: decode steps still to go without drafts (the back-off).
        num_drafts: verifies of a draft so far.
        num_draft_tokens: draft tokens verified so far.
        num_accepted_tokens: of those, tokens the target confirmed (before any stop check).
        num_paused_steps: decode steps the back-off kept from drafting so far.
    """

    acceptance_rate: float
    wasted_streak: int
    pause_steps_left: int
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_paused_steps: int


class _SeqDrafts:
    """One sequence's n-gram index, acceptance estimate, back-off, unverified shadow draft and
    counts."""

    __slots__ = (
        "backoff",
        "estimate",
        "index",
        "num_accepted_tokens",
        "num_draft_tokens",
        "num_drafts",
        "num_paused_steps",
        "shadow",
    )

    def __init__(self, n_min: int, n_max: int) -> None:
        self.index = NgramIndex(n_min, n_max)
        self.estimate = AcceptanceEstimate()
        self.backoff = DraftBackoff()
        self.shadow: tuple[int, int] | None = None  # (position, token) of a draft not made
        self.num_drafts = 0
        self.num_draft_tokens = 0
        self.num_accepted_tokens = 0
        self.num_paused_steps = 0


class NgramProposer:
    """Per-sequence prompt-lookup drafts, cut to the length that pays and paused after wasted
    verifies (`draft_length`).

    Args:
        config: the validated `SpeculativeConfig`.
    """

    def __init__(self, config: SpeculativeConfig) -> None:
        self.config = config
        self._seqs: dict[int, _SeqDrafts] = {}

    @property
    def num_speculative_tokens(self) -> int:
        """The most draft tokens one proposal holds."""
        return self.config.num_speculative_tokens

    def propose(self, seq_id: int, token_ids: Seq[int], k: int) -> list[int]:
        """Draft tokens for sequence ``seq_id``: the prompt-lookup match (at most ``min(k,
        num_speculative_tokens)`` tokens) cut to `best_draft_length` of its acceptance estimate;
        none while its back-off pauses it. Call it once per decode step of the sequence (each
        call counts a step off a pause).

        A match cut to nothing is kept as a shadow: `observe_token` checks its first token.

        Args:
            seq_id: the sequence (its state is kept until `forget`).
            token_ids: the sequence's prompt + output tokens so far (only ever appended to).
            k: the most tokens the caller can verify now (budget, max_tokens, blocks).
        """
        state = self._seqs.get(seq_id)
        if state is None:
            cfg = self.config
            state = self._seqs[seq_id] = _SeqDrafts(cfg.prompt_lookup_min, cfg.prompt_lookup_max)
        match = state.index.propose(token_ids, min(k, self.config.num_speculative_tokens))
        length = 0
        if state.backoff.allows_draft():
            length = best_draft_length(state.estimate.rate, len(match)) if match else 0
        else:
            state.num_paused_steps += 1
        state.shadow = (len(token_ids), match[0]) if match and not length else None
        return match[:length]

    def observe(self, seq_id: int, num_accepted: int, num_drafted: int) -> None:
        """Record a verified draft of ``num_drafted`` tokens, ``num_accepted`` confirmed (its
        acceptance estimate, and a back-off pause when none was)."""
        state = self._seqs.get(seq_id)
        if state is not None:
            state.estimate.observe(num_accepted, num_drafted)
            state.backoff.observe(num_accepted)
            state.num_drafts += 1
            state.num_draft_tokens += num_drafted
            state.num_accepted_tokens += num_accepted

    def observe_token(self, seq_id: int, position: int, token_id: int) -> None:
        """Record the token a plain decode produced at ``position``: a free trial of the
        shadow draft made for that position, if any."""
        state = self._seqs.get(seq_id)
        if state is None or state.shadow is None:
            return
        shadow_position, shadow_token = state.shadow
        state.shadow = None
        if shadow_position == position:
            state.estimate.observe(int(token_id == shadow_token), 1)

    def acceptance_rate(self, seq_id: int) -> float | None:
        """The sequence's acceptance estimate, or None if it has no state."""
        state = self._seqs.get(seq_id)
        return None if state is None else state.estimate.rate

    def draft_state(self, seq_id: int) -> DraftState | None:
        """A snapshot of the sequence's drafting, or None if it has no state."""
        state = self._seqs.get(seq_id)
        if state is None:
            return None
        return DraftState(
            acceptance_rate=state.estimate.rate,
            wasted_streak=state.backoff.wasted_streak,
            pause_steps_left=state.backoff.steps_left,
            num_drafts=state.num_drafts,
            num_draft_tokens=state.num_draft_tokens,
            num_accepted_tokens=state.num_accepted_tokens,
            num_paused_steps=state.num_paused_steps,
        )

    def forget(self, seq_id: int) -> None:
        """Drop the state of a finished sequence (no-op if it has none)."""
        self._seqs.pop(seq_id, None)

    @property
    def num_indexed_sequences(self) -> int:
        """Sequences whose state is kept (for leak checks in tests)."""
        return len(self._seqs)
