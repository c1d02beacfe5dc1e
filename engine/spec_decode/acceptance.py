"""Which draft tokens the target model confirms.

The runner gives, for a sequence with drafts ``d[0..k)``, one token per verified position:
``t[i]`` is the target's choice after the sequence's tokens plus ``d[:i]`` (``k + 1`` of them).
Drafts are accepted while ``t[i] == d[i]``; the first ``t`` that differs (or ``t[k]`` when all
``k`` are accepted) is the target's own next token. The emitted tokens are therefore always
``t[:accepted + 1]``.

Greedy rows take ``t[i] = argmax``, so the output is the plain greedy decode's. Sampled rows
draw each ``t[i]`` from the target's (filtered, penalised) distribution given that prefix, and
a draft is accepted only where the draw equals it. Each emitted token is then a draw from the
target's distribution given exactly the emitted tokens before it, so the output distribution
is the target's: this is the rejection rule of speculative sampling (Leviathan et al. 2023,
https://arxiv.org/abs/2211.17192, checked 2026-12-03) for a draft that puts all its mass on one
token (accept ``d`` with probability ``p(d)``, else draw from ``p`` without ``d``), which
accepts exactly as often.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["accepted_length"]


def accepted_length(draft_token_ids: Sequence[int], target_token_ids: Sequence[int]) -> int:
    """Length of the longest prefix of the draft equal to the target's tokens.

    Args:
        draft_token_ids: ``k`` proposed tokens.
        target_token_ids: the target's ``k + 1`` tokens (position ``i`` after ``draft[:i]``).

    Returns:
        ``a`` in ``0..k``; the caller emits ``target_token_ids[: a + 1]``.

    Raises:
        ValueError: ``len(target_token_ids) != len(draft_token_ids) + 1``.
    """
    if len(target_token_ids) != len(draft_token_ids) + 1:
        raise ValueError(
            f"{len(draft_token_ids)} drafts need {len(draft_token_ids) + 1} target tokens, got "
            f"{len(target_token_ids)}"
        )
    for i, draft in enumerate(draft_token_ids):
        if target_token_ids[i] != draft:
            return i
    return len(draft_token_ids)
