"""Fixtures for tests/engine; helpers and fixtures live in engine_support.py."""

from __future__ import annotations

from engine_support import (  # noqa: F401 (pytest finds fixtures by name here)
    _one_torch_thread,
    prompts,
    tiny_checkpoint,
    tinystories_dir,
)
from gguf_support import (  # noqa: F401
    hf_smollm2_model,
    hf_smollm2_tokenizer,
    smollm2_gguf,
    smollm2_llm,
)
