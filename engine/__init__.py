"""The bundled inference engine: paged KV cache, automatic prefix caching, continuous batching.

Public names are loaded on first use (PEP 562), so ``import promptcache.engine`` stays cheap
and imports no torch; ``from promptcache.engine import LLM`` loads the model stack.

Quick start::

    from promptcache.engine import LLM, SamplingParams

    llm = LLM(model="path/to/checkpoint")
    [out] = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=32))

See docs/engine.md for the design.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptcache.lazy import lazy_exports

if TYPE_CHECKING:
    from .config import EngineConfig
    from .llm import LLM
    from .llm_engine import LLMEngine
    from .model_config import ModelConfig
    from .outputs import EngineStats, RequestOutput
    from .sampler import TokenLogprobs
    from .sampling_params import SamplingParams
    from .spec_decode import SpeculativeConfig
    from .tokenizer import Tokenizer

__all__ = [
    "LLM",
    "EngineConfig",
    "EngineStats",
    "LLMEngine",
    "ModelConfig",
    "RequestOutput",
    "SamplingParams",
    "SpeculativeConfig",
    "TokenLogprobs",
    "Tokenizer",
]

_WHERE = {
    "LLM": ".llm",
    "EngineConfig": ".config",
    "EngineStats": ".outputs",
    "LLMEngine": ".llm_engine",
    "ModelConfig": ".model_config",
    "RequestOutput": ".outputs",
    "SamplingParams": ".sampling_params",
    "SpeculativeConfig": ".spec_decode",
    "TokenLogprobs": ".sampler",
    "Tokenizer": ".tokenizer",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
