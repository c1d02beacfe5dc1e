"""Offline batch generation: ``LLM(model=...).generate(prompts, SamplingParams(...))``.

Example::

    from promptcache.engine import LLM, SamplingParams

    llm = LLM(model="../shared/models/tinystories-656k", dtype="float32")
    [out] = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=20))
    print(out.text, out.finish_reason, out.num_cached_tokens)

Warm-up at construction, as ``engine serve --warmup`` / ``--warmup-from-log`` do it
(`promptcache.engine.server.warmup`)::

    llm = LLM(model="...", warmup="warm.jsonl", chat_template=TEMPLATE)
    llm = LLM(model="...", warmup_from_log="proxy.db", warmup_top=5, served_model_name="tiny")
    print(llm.warmup_report)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promptcache.errors import ConfigError, InvalidRequestError

from .llm_engine import LLMEngine
from .outputs import RequestOutput
from .sampling_params import SamplingParams
from .tokenizer import Tokenizer

if TYPE_CHECKING:
    from .server.warmup import WarmupReport

__all__ = ["LLM"]

Prompt = str | list[int]


class LLM:
    """Load a model once, then generate for batches of prompts with continuous batching.

    Args:
        model: checkpoint directory or Hugging Face Hub id.
        warmup: a JSONL file of request bodies to prefill before returning (``engine serve
            --warmup FILE``).
        warmup_from_log: a proxy log (SQLite path or ``postgresql://`` URL) whose
            ``warmup_top`` costliest stored prefix families are prefilled (``engine serve
            --warmup-from-log``; the proxy must have run with ``--store-prefixes``).
        warmup_top: how many families ``warmup_from_log`` prefills (>= 1; default 10); given
            without ``warmup_from_log`` it is refused, as ``engine serve --top`` alone is.
        served_model_name: the ``model`` the warm-up bodies name (default: ``model`` as
            given, like ``engine serve``); a logged family of another model is not prefilled.
        chat_template: Jinja chat template text for chat bodies (models without one).
        **config_overrides: ``EngineConfig`` fields, e.g. ``dtype="float32"``,
            ``enable_prefix_caching=False``, ``max_num_batched_tokens=64``, ``num_blocks=32``.

    Attributes:
        warmup_report: what the warm-up did (`WarmupReport`: prompts, tokens, cached blocks,
            seconds), or None without one.
        warmup_skipped: ``(family id, reason)`` of costlier logged families whose stored body
            could not be prepared and were passed over for the next (the banner's "passed
            over" of ``engine serve``); empty without ``warmup_from_log``.

    Raises:
        ModelLoadError, ConfigError: as ``LLMEngine.from_pretrained``; ConfigError also for a
            warm-up file or log that cannot be read or parsed (one line, as ``engine serve``),
            and for a warm-up with ``enable_prefix_caching=False`` (nothing would keep it).
    """

    def __init__(
        self,
        model: str | Path,
        *,
        warmup: str | Path | None = None,
        warmup_from_log: str | Path | None = None,
        warmup_top: int | None = None,
        served_model_name: str | None = None,
        chat_template: str | None = None,
        **config_overrides: Any,
    ) -> None:
        if warmup_top is not None and warmup_from_log is None:
            raise ConfigError("warmup_top needs warmup_from_log (the proxy log to rank)")
        if warmup_top is not None and warmup_top < 1:
            raise ConfigError(f"warmup_top must be at least 1, got {warmup_top}")
        self.engine = LLMEngine.from_pretrained(model, **config_overrides)
        self._counter = 0
        self.warmup_report: WarmupReport | None = None
        self.warmup_skipped: list[tuple[str, str]] = []
        if chat_template is not None:
            self.engine.tokenizer.set_chat_template(chat_template)
        if warmup is not None or warmup_from_log is not None:
            self.warmup_report = self._warm_up(
                warmup,
                warmup_from_log,
                10 if warmup_top is None else warmup_top,
                served_model_name or str(model),
            )

    def _warm_up(
        self,
        file: str | Path | None,
        log: str | Path | None,
        top: int,
        name: str,
    ) -> WarmupReport:
        from .server.protocol import ServingContext
        from .server.warmup import read_warmup_file, read_warmup_log, run_warmup

        engine = self.engine
        ctx = ServingContext(
            model_names=(name,),
            tokenizer=engine.tokenizer,
            max_model_len=engine.effective_max_model_len,
            vocab_size=engine.model_config.vocab_size,
            max_num_seqs=engine.config.max_num_seqs,
        )
        requests = [] if file is None else read_warmup_file(file, ctx)
        if log is not None:
            from_log = read_warmup_log(log, top, ctx)
            requests += from_log.requests
            self.warmup_skipped = from_log.skipped
        return run_warmup(engine, requests)

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
