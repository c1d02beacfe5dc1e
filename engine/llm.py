"""Offline batch generation: ``LLM(model=...).generate(prompts, SamplingParams(...))``.

Example::

    from promptcache.engine import LLM, SamplingParams

    llm = LLM(model="../shared/models/tinystories-656k", dtype="float32")
    [out] = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=20))
    print(out.text, out.finish_reason, out.num_cached_tokens)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from promptcache.errors import InvalidRequestError

from .llm_engine import LLMEngine
from .outputs import RequestOutput
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

__all__ = ["LLM"]

Prompt = str | list[int]


class LLM:
    """Load a model once, then generate for batches of prompts with continuous batching.

    Args:
        model: checkpoint directory or Hugging Face Hub id.
        **config_overrides: ``EngineConfig`` fields, e.g. ``dtype="float32"``,
            ``enable_prefix_caching=False``, ``max_num_batched_tokens=64``, ``num_blocks=32``.

    Raises:
        ModelLoadError, ConfigError: as ``LLMEngine.from_pretrained``.
    """

    def __init__(self, model: str | Path, **config_overrides: Any) -> None:
        self.engine = LLMEngine.from_pretrained(model, **config_overrides)
        self._counter = 0

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer."""
        return self.engine.tokenizer

    def close(self) -> int:
        """Write the cached blocks to the disk tier (``kv_disk_dir``), so the next ``LLM`` on
        the same model and settings finds them; returns the blocks written (``LLMEngine.close``)."""
        return self.engine.close()

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def generate(
        self,
        prompts: Prompt | Sequence[Prompt],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[RequestOutput]:
        """Generate for every prompt and return the final outputs.

        Args:
            prompts: one prompt or a list; a prompt is a string or a list of token ids (a plain
                list of ints is one tokenised prompt).
            params: one ``SamplingParams`` for all prompts, one per prompt, or None (defaults).

        Returns:
            Finished outputs in prompt order; a prompt with ``n > 1`` contributes ``n``
            consecutive outputs ordered by ``sample_index``.

        Raises:
            InvalidRequestError: a bad prompt, or as many params as prompts were not given.
        """
        batch = _as_prompt_list(prompts)
        if params is None or isinstance(params, SamplingParams):
            per_prompt = [params or SamplingParams()] * len(batch)
        else:
            per_prompt = list(params)
            if len(per_prompt) != len(batch):
                raise InvalidRequestError(
                    f"got {len(per_prompt)} SamplingParams for {len(batch)} prompts; pass one "
                    "for all or one per prompt"
                )
        ids: list[str] = []
        try:
            for prompt, p in zip(batch, per_prompt, strict=True):
                self._counter += 1
                request_id = f"generate-{self._counter}"
                self.engine.add_request(request_id, prompt, p)
                ids.append(request_id)
            finished: dict[tuple[str, int], RequestOutput] = {}
            while self.engine.has_unfinished_requests():
                for out in self.engine.step():
                    if out.finished:
                        finished[(out.request_id, out.sample_index)] = out
        except BaseException:
            for request_id in ids:
                self.engine.abort_request(request_id)
            raise
        return [
            finished[(request_id, i)]
            for request_id, p in zip(ids, per_prompt, strict=True)
            for i in range(p.n)
        ]


def _as_prompt_list(prompts: Prompt | Sequence[Prompt]) -> list[Prompt]:
    if isinstance(prompts, str):
        return [prompts]
    if isinstance(prompts, Sequence) and prompts and all(isinstance(t, int) for t in prompts):
        return [list(prompts)]  # type: ignore[arg-type]
    if isinstance(prompts, Sequence):
        out: list[Prompt] = []
        for p in prompts:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, (list, tuple)):
                out.append(list(p))  # add_request checks every item is an int id
            else:
                raise InvalidRequestError(f"a prompt must be a string or token ids, got {p!r}")
        return out
    raise InvalidRequestError("prompts must be a string, token ids, or a list of them")
