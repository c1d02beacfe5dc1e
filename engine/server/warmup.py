"""Warm-up of fixed prompts at start (``promptcache engine serve --warmup FILE``).

The file is JSONL: one request body per line, as a client would POST it, with ``messages``
(a ``/v1/chat/completions`` body) or ``prompt`` (a ``/v1/completions`` body); ``model`` may be
left out (the first served name is used). Blank lines are skipped. Each body goes through the
same parser as a live request (`promptcache.engine.server.protocol`: chat template, special
tokens, ``cache_salt``), so the warmed blocks are exactly the blocks a live request with the
same body hits. Each prompt is then prefilled by the engine with one greedy output token; its
full blocks enter the prefix cache like any request's (they are evicted by the same LRU rule,
and demoted to the cache tiers when there are tiers).

The server runs the warm-up on its engine thread before any request, and ``/health`` answers
503 ``{"status": "warming up"}`` until it has finished.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from promptcache.errors import ConfigError, InvalidRequestError

from ..block_manager import prefix_block_hashes
from ..sampling_params import SamplingParams
from .protocol import ServingContext, parse_chat_request, parse_completion_request

if TYPE_CHECKING:
    from ..llm_engine import LLMEngine

__all__ = ["WarmupReport", "WarmupRequest", "read_warmup_file", "run_warmup"]


@dataclass(frozen=True)
class WarmupRequest:
    """One line of a warm-up file, parsed.

    Attributes:
        line: 1-based line number in the file.
        prompts: token ids of each prompt (a completions body may hold several).
        cache_salt: the body's ``cache_salt``, or None.
    """

    line: int
    prompts: list[list[int]]
    cache_salt: str | None


@dataclass(frozen=True)
class WarmupReport:
    """What a warm-up did.

    Attributes:
        num_requests: request bodies run.
        num_prompts: prompts prefilled (a completions body may hold several).
        num_prompt_tokens: their tokens, summed.
        num_cached_blocks: distinct full blocks of those prompts findable in the prefix cache
            (pool or tiers) once the warm-up finished.
        num_cached_tokens: prompt tokens already cached when each prompt was admitted (a
            prompt sharing a prefix with an earlier one, or blocks a disk tier restored).
        seconds: wall time of the warm-up.
    """

    num_requests: int
    num_prompts: int
    num_prompt_tokens: int
    num_cached_blocks: int
    num_cached_tokens: int
    seconds: float


def read_warmup_file(path: str | Path, ctx: ServingContext) -> list[WarmupRequest]:
    """Parse a warm-up JSONL file into token ids, with the live request parser.

    Raises:
        ConfigError: the file cannot be read, or a line is not a JSON object with ``messages``
            or ``prompt`` that the server would accept; the message names the file and line.
    """
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(f"cannot read the warm-up file {file}: {reason}") from None
    requests: list[WarmupRequest] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{file}:{number}"
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"{where}: not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise ConfigError(f"{where}: each line must be a JSON object (a request body)")
        body.setdefault("model", ctx.model_names[0])
        try:
            if "messages" in body:
                chat = parse_chat_request(body, ctx)
                requests.append(WarmupRequest(number, [chat.prompt], chat.cache_salt))
            elif "prompt" in body:
                completion = parse_completion_request(body, ctx)
                requests.append(WarmupRequest(number, completion.prompts, completion.cache_salt))
            else:
                raise ConfigError(
                    f"{where}: a warm-up request needs 'messages' (chat) or 'prompt' (completions)"
                )
        except InvalidRequestError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if not requests:
        raise ConfigError(f"the warm-up file {file} holds no request")
    return requests


def run_warmup(engine: LLMEngine, requests: list[WarmupRequest]) -> WarmupReport:
    """Prefill every prompt of `requests` (one greedy token each) and wait until all finish.

    Call on the thread that owns the engine, before it serves anything else.

    Raises:
        ConfigError: the engine refused a prompt (it cannot fit the KV pool, for one).
    """
    start = time.perf_counter()
    params = SamplingParams(temperature=0.0, max_tokens=1)
    ids: list[str] = []
    hashes: set[int] = set()
    num_tokens = 0
    for request in requests:
        for i, prompt in enumerate(request.prompts):
            request_id = f"warmup-{request.line}-{i}"
            try:
                engine.add_request(request_id, prompt, params, cache_salt=request.cache_salt)
            except InvalidRequestError as exc:
                for queued in ids:
                    engine.abort_request(queued)
                raise ConfigError(f"warm-up line {request.line}: {exc}") from None
            ids.append(request_id)
            num_tokens += len(prompt)
            hashes.update(prefix_block_hashes(prompt, engine.config.block_size, request.cache_salt))
    cached = 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                cached += out.num_cached_tokens
    bm = engine.scheduler.block_manager
    held = bm.cached_block_hashes()
    tiers = engine.kv_tiers
    num_blocks = sum(h in held or (tiers is not None and tiers.contains(h)) for h in hashes)
    return WarmupReport(
        num_requests=len(requests),
        num_prompts=len(ids),
        num_prompt_tokens=num_tokens,
        num_cached_blocks=num_blocks,
        num_cached_tokens=cached,
        seconds=time.perf_counter() - start,
    )
