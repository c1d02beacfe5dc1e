"""Speculative decoding with prompt lookup (n-gram drafts), pure Python (no torch).

- `SpeculativeConfig` (config.py): vLLM's ``speculative_config`` for ``method="ngram"``:
  ``num_speculative_tokens``, ``prompt_lookup_max``, ``prompt_lookup_min``.
- `NgramProposer` (ngram_proposer.py): drafts from the sequence's own prompt and output, cut
  to the length the sequence's acceptance so far pays for, and paused for a growing number of
  steps after verifies that kept none of their drafts (draft_length.py).
- `accepted_length` (acceptance.py): how many drafts the target model's own choices confirm.

The scheduler asks the proposer for a draft when it plans a decode, schedules the draft
tokens after the sequence's last token (one forward pass through the prefill path of the
paged KV cache), and in `Scheduler.postprocess` keeps the confirmed prefix plus the target's
next token; the blocks that only held rejected drafts are released
(`BlockManager.trim_to_computed`). See docs/engine.md, "Speculative decoding".
"""

from __future__ import annotations

from .acceptance import accepted_length
from .config import SPECULATIVE_METHODS, SpeculativeConfig
from .ngram_proposer import DraftState, NgramProposer

__all__ = [
    "SPECULATIVE_METHODS",
    "DraftState",
    "NgramProposer",
    "SpeculativeConfig",
    "accepted_length",
]
