"""Model minimum cacheable prefix lengths (tokens), from the SDK's dated table plus config.

The table is ``promptcache/data/model_minimums.toml`` (Anthropic rows, ``lint_min_tokens`` where
the linter's value differs on purpose), matched by ``promptcache.minimums.ModelMinimums.lookup``.
"""

from __future__ import annotations

import functools
import math
import re

from promptcache.minimums import ModelMinimums, default_model_minimums

_SUFFIXES = re.compile(r"(@.*|-v\d+(:\d+)?|-\d{8}|-latest)$")


@functools.cache
def _bundled() -> ModelMinimums:
    rows = default_model_minimums().rows
    return ModelMinimums(tuple(row for row in rows if row.vendor == "anthropic"))


def family(model: str) -> str:
    """Normalise a model id.

    ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` -> ``claude-sonnet-4-5``.
    """
    name = model.strip().lower()
    start = name.find("claude-")
    if start > 0:
        name = name[start:]
    previous = None
    while previous != name:
        previous = name
        name = _SUFFIXES.sub("", name)
    if name.endswith("-0"):
        name = name[:-2]
    return name


def minimum_tokens(model: str, overrides: tuple[tuple[str, int], ...] = ()) -> int | None:
    """Minimum cacheable prefix of ``model`` in tokens, or None when the model is unknown."""
    for key, tokens in overrides:
        if key.lower() == model.lower() or family(key) == family(model):
            return tokens
    row = _bundled().lookup(family(model))
    if row is None:
        return None
    return row.min_tokens if row.lint_min_tokens is None else row.lint_min_tokens


def estimate_tokens(chars: int, non_ascii: int) -> int:
    """A generous token estimate for text of ``chars`` characters (tokens, rounded up).

    ASCII text averages about 4 characters per token; counting 3 over-estimates, and each
    non-ASCII character counts 1.5 tokens (CJK text is about one token per character). Used only
    to say "below the minimum", so over-estimating keeps false reports away.
    """
    return math.ceil((chars - non_ascii) / 3 + non_ascii * 1.5)
