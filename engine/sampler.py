"""Turn a batch of logits into next tokens: penalties, greedy or filtered sampling, logprobs.

Order of operations per row (transformers' logits-processor order):

1. penalties on the raw logits: repetition (prompt + output tokens; divide positive logits,
   multiply negative ones), then presence and frequency (output tokens; OpenAI semantics
   ``logit -= frequency * count + presence * (count > 0)``);
2. greedy rows (temperature 0): ``argmax``, done;
3. temperature: ``logits / T``;
4. top-k: keep logits >= the k-th largest (ties at the boundary are kept);
5. top-p: over the renormalised distribution sorted descending, keep a token when the mass
   strictly before it is < top_p (the most likely token is always kept);
6. min-p: drop tokens whose probability is < ``min_p * p(max)``;
7. draw from the remaining distribution with the row's ``torch.Generator`` (per-request seed:
   the same seed gives the same noise whatever else is in the batch; the logits still move
   with the batch by fp32 rounding of shared-prefix merges, and under weight-only int4 / int8
   layers by their change of path with the batch's row count, see ``models/quant_linear.py``).

Logprobs are those of the model's raw distribution (``log_softmax`` of the logits before
penalties and temperature), as vLLM returns by default: the sampled token's plus the top N.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .sampling_params import SamplingParams

__all__ = ["SampleRequest", "Sampler", "SamplerOutput", "TokenLogprobs"]


@dataclass
class SampleRequest:
    """What the sampler needs to know about one row of logits.

    Attributes:
        params: the sequence's sampling parameters.
        token_ids: prompt + output ids so far (for the repetition penalty).
        num_prompt_tokens: how many of ``token_ids`` are the prompt.
        generator: the row's RNG (seeded per request), or None for the sampler's own.
    """

    params: SamplingParams
    token_ids: Sequence[int]
    num_prompt_tokens: int
    generator: torch.Generator | None = None


@dataclass
class TokenLogprobs:
    """Log-probabilities for one generated token.

    Attributes:
        token_id: the sampled token.
        logprob: its log-probability under the raw model distribution (natural log).
        top: the ``logprobs`` most likely ``(token_id, logprob)`` pairs, most likely first.
    """

    token_id: int
    logprob: float
    top: list[tuple[int, float]]


@dataclass
class SamplerOutput:
    """One entry per logits row: the next token and, when asked for, its logprobs."""

    token_ids: list[int]
    logprobs: list[TokenLogprobs | None]


def apply_penalties(logits: torch.Tensor, requests: Sequence[SampleRequest]) -> torch.Tensor:
    """Repetition / presence / frequency penalties, in place on ``logits [num_rows, vocab]``."""
    device = logits.device
    vocab = logits.shape[-1]
    for row, req in enumerate(requests):
        p = req.params
        if not p.has_penalties:
            continue
        if p.repetition_penalty != 1.0 and req.token_ids:
            seen = torch.unique(torch.tensor(list(req.token_ids), dtype=torch.long, device=device))
            score = logits[row, seen]
            logits[row, seen] = torch.where(
                score < 0, score * p.repetition_penalty, score / p.repetition_penalty
            )
        output = list(req.token_ids[req.num_prompt_tokens :])
        if (p.presence_penalty or p.frequency_penalty) and output:
            ids = torch.tensor(output, dtype=torch.long, device=device)
            counts = torch.bincount(ids, minlength=vocab).to(logits.dtype)
            logits[row] -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0)
    return logits


def filter_logits(
    logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, min_p: torch.Tensor
) -> torch.Tensor:
    """Mask (to -inf) what top-k, top-p and min-p remove, row by row.

    Args:
        logits: ``[num_rows, vocab]`` fp32, already divided by the temperature.
        top_k: ``[num_rows]`` int64, 0 = off.
        top_p: ``[num_rows]`` fp32 in (0, 1], 1 = off.
        min_p: ``[num_rows]`` fp32 in [0, 1], 0 = off.

    Returns:
        A new ``[num_rows, vocab]`` tensor with removed entries set to -inf.
    """
    vocab = logits.shape[-1]
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    k = torch.where(top_k > 0, top_k.clamp(max=vocab), torch.full_like(top_k, vocab))
    kth = sorted_logits.gather(1, (k - 1).unsqueeze(1))
    sorted_logits = sorted_logits.masked_fill(sorted_logits < kth, float("-inf"))
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    # top_p = 1 is off outright: the fp32 cumulative sum can reach 1.0 before the last tokens
    # (seen on an AVX2 CPU), which would drop them
    remove = (mass_before >= top_p.unsqueeze(1)) & (top_p < 1).unsqueeze(1)
    remove[:, 0] = False
    sorted_logits = sorted_logits.masked_fill(remove, float("-inf"))
    probs = sorted_logits.softmax(dim=-1)
    remove = probs < (min_p * probs[:, 0]).unsqueeze(1)
    sorted_logits = sorted_logits.masked_fill(remove, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(1, order, sorted_logits)


class Sampler:
    """Batched sampler; one instance per engine.

    Args:
        seed: seed of the RNG used by rows without their own generator.
    """

    def __init__(self, seed: int = 0) -> None:
        self._generator = torch.Generator().manual_seed(seed)

    def __call__(self, logits: torch.Tensor, requests: Sequence[SampleRequest]) -> SamplerOutput:
        """Pick one token per row of ``logits [num_rows, vocab]`` (fp32) for ``requests``."""
        logits = logits.float()
        raw = logits
        if any(r.params.has_penalties for r in requests):
            logits = apply_penalties(logits.clone(), requests)
        greedy = [r.params.is_greedy for r in requests]
        chosen = logits.argmax(dim=-1)
        sampled_rows = [i for i, g in enumerate(greedy) if not g]
        if sampled_rows:
            rows = torch.tensor(sampled_rows, device=logits.device)
            reqs = [requests[i] for i in sampled_rows]
            temps = torch.tensor([r.params.temperature for r in reqs], device=logits.device)
            scaled = logits[rows] / temps.unsqueeze(1)
            if any(r.params.top_k or r.params.top_p < 1.0 or r.params.min_p for r in reqs):
                scaled = filter_logits(
                    scaled,
                    torch.tensor([r.params.top_k for r in reqs], device=logits.device),
                    torch.tensor([r.params.top_p for r in reqs], device=logits.device),
                    torch.tensor([r.params.min_p for r in reqs], device=logits.device),
                )
            probs = scaled.softmax(dim=-1)
            for j, req in enumerate(reqs):
                gen = req.generator or self._generator
                # Exponential-race sampling: argmax(p / E), E ~ Exp(1), draws from p exactly.
                noise = torch.empty(probs.shape[1]).exponential_(generator=gen)
                chosen[sampled_rows[j]] = (probs[j].cpu() / noise).argmax()
        token_ids = [int(t) for t in chosen.tolist()]
        return SamplerOutput(token_ids, self._logprobs(raw, requests, token_ids))

    @staticmethod
    def _logprobs(
        raw: torch.Tensor, requests: Sequence[SampleRequest], token_ids: list[int]
    ) -> list[TokenLogprobs | None]:
        wanted = [r.params.logprobs for r in requests]
        if all(n is None for n in wanted):
            return [None] * len(requests)
        logprobs = raw.log_softmax(dim=-1)
        top_n = max(n or 0 for n in wanted)
        top_vals, top_ids = logprobs.topk(top_n, dim=-1) if top_n else (None, None)
        out: list[TokenLogprobs | None] = []
        for row, n in enumerate(wanted):
            if n is None:
                out.append(None)
                continue
            top: list[tuple[int, float]] = []
            if n and top_vals is not None and top_ids is not None:
                top = list(zip(top_ids[row, :n].tolist(), top_vals[row, :n].tolist(), strict=True))
            token = token_ids[row]
            out.append(TokenLogprobs(token, float(logprobs[row, token]), top))
        return out
