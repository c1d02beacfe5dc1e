"""Warm-up of fixed prompts at start (``promptcache engine serve --warmup FILE``).

The file is JSONL: one request body per line, as a client would POST it, with ``messages``
(a ``/v1/chat/completions`` body) or ``prompt`` (a ``/v1/completions`` body); ``model`` may be
left out (the first served name is used). Blank lines are skipped. Each body goes through the
same parser as a live request (`promptcache.engine.server.protocol`: chat template, special
tokens, ``cache_salt``), so the warmed blocks are exactly the blocks a live request with the
same body hits. Each prompt is then prefilled by the engine with one greedy output token; its
full blocks enter the prefix cache like any request's (they are evicted by the same LRU rule,
and demoted to the cache tiers when there are tiers).

``engine serve --warmup-from-log PROXY_DB --top N`` (:func:`read_warmup_log`) takes its bodies
from a proxy log instead: the stored representative bodies of the N costliest prefix families
(``promptcache proxy --store-prefixes``, `promptcache.proxy.prefix_store`), ranked over the whole
log by the report's per-family cost. Only families of a served model name whose body is a chat
or completions request are candidates (the requests this server, or one serving the same
names, answered); a body the parser refuses is passed over, named in the result, and the next
family takes its place.

The server runs the warm-up on its engine thread before any request, and ``/health`` answers
503 ``{"status": "warming up"}`` until it has finished; once every prompt is queued the body also
counts them, ``"prompts_prefilled"`` of ``"prompts"``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promptcache.errors import ConfigError, InvalidRequestError, StoreError

from ..block_manager import prefix_block_hashes
from ..sampling_params import SamplingParams
from .protocol import ServingContext, parse_chat_request, parse_completion_request

if TYPE_CHECKING:
    from ..llm_engine import LLMEngine

__all__ = [
    "LOG_APIS",
    "LogWarmup",
    "WarmupReport",
    "WarmupRequest",
    "read_warmup_file",
    "read_warmup_log",
    "run_warmup",
]

#: The proxy's ``api`` values of the bodies this server can prefill (`promptcache.proxy.vendors`).
LOG_APIS = ("openai_chat", "openai_completions")


@dataclass(frozen=True)
class WarmupRequest:
    """One line of a warm-up file, parsed.

    Attributes:
        line: 1-based line number in the file.
        prompts: token ids of each prompt (a completions body may hold several).
        cache_salt: the body's ``cache_salt``, or None.
        origin: where the body comes from, for messages (``"file.jsonl:3"``, ``"prefix
            family 1a2b3c4d of proxy.db"``).
    """

    line: int
    prompts: list[list[int]]
    cache_salt: str | None
    origin: str = ""


@dataclass(frozen=True)
class WarmupReport:
    """What a warm-up did.

    Attributes:
        num_requests: request bodies run.
        num_prompts: prompts prefilled (a completions body may hold several).
        num_prompt_tokens: their tokens, summed.
        num_cached_blocks: distinct full blocks of those prompts findable in the prefix cache
            (pool or tiers) once the warm-up finished.
        num_blocks: distinct full blocks of those prompts; more than ``num_cached_blocks`` when
            the cache could not keep them all (the pool and tiers hold fewer blocks).
        num_cached_tokens: prompt tokens already cached when each prompt was admitted (a
            prompt sharing a prefix with an earlier one, or blocks a disk tier restored).
        seconds: wall time of the warm-up.
        stopped: the server began to stop before the warm-up finished (Ctrl-C, SIGTERM): the
            prompts still running were aborted; ``num_finished`` of ``num_prompts`` were done.
        num_finished: prompts prefilled to the end.
    """

    num_requests: int
    num_prompts: int
    num_prompt_tokens: int
    num_cached_blocks: int
    num_cached_tokens: int
    seconds: float
    num_blocks: int = 0
    stopped: bool = False
    num_finished: int = 0


def read_warmup_file(path: str | Path, ctx: ServingContext) -> list[WarmupRequest]:
    """Parse a warm-up JSONL file into token ids, with the live request parser.

    Raises:
        ConfigError: the file cannot be read, or a line is not a JSON object with ``messages``
            or ``prompt`` that the server would accept; the message names the file and line.
    """
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8-sig")  # may start with a BOM, as bodies may
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
            requests.append(_parse_body(body, ctx, number, where))
        except InvalidRequestError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if not requests:
        raise ConfigError(f"the warm-up file {file} holds no request")
    return requests


def _parse_body(body: dict[str, Any], ctx: ServingContext, line: int, where: str) -> WarmupRequest:
    """One request body as the live parser reads it.

    Raises:
        ConfigError: the body has neither ``messages`` nor ``prompt``.
        InvalidRequestError: the live parser refuses it.
    """
    if "messages" in body:
        chat = parse_chat_request(body, ctx)
        return WarmupRequest(line, [chat.prompt], chat.cache_salt, where)
    if "prompt" in body:
        completion = parse_completion_request(body, ctx)
        return WarmupRequest(line, completion.prompts, completion.cache_salt, where)
    raise ConfigError(
        f"{where}: a warm-up request needs 'messages' (chat) or 'prompt' (completions)"
    )


@dataclass(frozen=True)
class LogWarmup:
    """The warm-up taken from a proxy log (:func:`read_warmup_log`).

    Attributes:
        requests: one request per chosen family, costliest first.
        families: the chosen families' ids (``requests.prefix_family``), in the same order.
        skipped: ``(family id, reason)`` of costlier families whose stored body the parser
            refused, passed over for the next family.
    """

    requests: list[WarmupRequest]
    families: list[str]
    skipped: list[tuple[str, str]]


def read_warmup_log(path: str | Path, top: int, ctx: ServingContext) -> LogWarmup:
    """The stored bodies of the ``top`` costliest prefix families of a proxy log, parsed.

    ``path`` is the proxy's ``--db``: a SQLite file, opened read-only, or a ``postgresql://``
    URL (`promptcache.proxy.report.connect_log`: one read-only snapshot). Families rank as
    `promptcache.proxy.prefix_store.costliest_prefixes` ranks them (USD cost, then input
    tokens, requests, id), among those
    whose model is one of ``ctx.model_names`` and whose body is a chat or completions request
    (:data:`LOG_APIS`). Fewer than ``top`` families are taken when the log has fewer.

    Raises:
        ConfigError: ``top`` < 1; the file is missing, unreadable or not a proxy log; it holds
            no stored body (the proxy ran without ``--store-prefixes``) or none this server can
            prefill; or every candidate body was refused (the first reason is named).
    """
    from promptcache.proxy.dialect import is_postgres_url
    from promptcache.proxy.prefix_store import costliest_prefixes, stored_models

    if top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}")
    postgres = is_postgres_url(path)
    conn: Any
    if postgres:
        from promptcache.proxy.report import connect_log
        from promptcache.proxy.store_postgres import redact_url

        file = redact_url(str(path))
        try:
            conn = connect_log(str(path))
        except StoreError as exc:
            raise ConfigError(str(exc)) from None
    else:
        local = Path(path).expanduser()
        file = str(local)
        if not local.is_file():
            reason = "it is a directory" if local.is_dir() else "no such file"
            raise ConfigError(f"cannot read the proxy log {file}: {reason}")
        try:
            conn = sqlite3.connect(f"{local.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open the proxy log {file}: {exc}") from None
    no_prefixes = (
        f"the proxy log {file} holds no stored request bodies; run the proxy with "
        f"--store-prefixes (promptcache proxy --db {file} --store-prefixes ...) so it keeps one "
        "per prefix family"
    )
    try:
        try:
            conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            ranked = costliest_prefixes(conn, None, apis=LOG_APIS, models=ctx.model_names)
            held = stored_models(conn) if not ranked else []
        except StoreError as exc:  # SQLite: a log older than the table; Postgres: any failure
            raise ConfigError(str(exc) if postgres else no_prefixes) from None
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc) or "busy" in str(exc):  # another connection's lock
                raise ConfigError(
                    f"the proxy log {file} is locked by another connection ({exc}): end the "
                    "transaction that holds it, then start again"
                ) from None
            raise ConfigError(f"{file} is not a promptcache proxy log ({exc})") from None
    finally:
        conn.close()
    if not ranked:
        if not held:
            raise ConfigError(no_prefixes)
        kinds = ", ".join(f"{n} of {model or '(no model)'} ({api})" for model, api, n in held)
        names = ", ".join(repr(n) for n in ctx.model_names)
        raise ConfigError(
            f"the proxy log {file} stores no chat or completions body of {names} (it stores "
            f"prefix families: {kinds}); serve under the logged name (engine serve "
            "--served-model-name NAME, LLM(served_model_name=NAME))"
        )
    requests: list[WarmupRequest] = []
    families: list[str] = []
    skipped: list[tuple[str, str]] = []
    for prefix in ranked:
        if len(requests) == top:
            break
        where = f"prefix family {prefix.prefix_family[:8]} of {file}"
        try:
            body = json.loads(prefix.body)
            if not isinstance(body, dict):
                raise ConfigError("the stored body is not a JSON object")
            requests.append(_parse_body(body, ctx, len(requests) + 1, where))
        except (ValueError, InvalidRequestError) as exc:  # ConfigError is a ValueError
            reason = str(exc).removeprefix(f"{where}: ")
            skipped.append((prefix.prefix_family, f"request {prefix.request_id}: {reason}"))
            continue
        families.append(prefix.prefix_family)
    if not requests:
        family, reason = skipped[0]
        raise ConfigError(
            f"no stored body of {file} can be prefilled: prefix family {family[:8]}, {reason}"
        )
    return LogWarmup(requests, families, skipped)


def run_warmup(
    engine: LLMEngine,
    requests: list[WarmupRequest],
    should_stop: Callable[[], bool] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> WarmupReport:
    """Prefill every prompt of `requests` (one greedy token each) and wait until all finish.

    Call on the thread that owns the engine, before it serves anything else. ``should_stop``
    is asked between engine steps (the server passes its shutdown flag): once it answers True
    the prompts still running are aborted and the report says ``stopped``. ``on_progress`` is
    called with ``(prompts prefilled, prompts)`` once every prompt is queued and after each
    engine step.

    Raises:
        ConfigError: the engine has no prefix cache to keep the prompts' blocks in
            (``enable_prefix_caching=False``), or it refused a prompt (it cannot fit the KV
            pool, for one).
    """
    if not engine.config.enable_prefix_caching:
        raise ConfigError(
            "a warm-up prefills prompts into the prefix cache; it needs "
            "enable_prefix_caching=True (engine serve: leave out --no-enable-prefix-caching)"
        )
    start = time.perf_counter()
    params = SamplingParams(temperature=0.0, max_tokens=1)
    ids: list[str] = []
    hashes: set[int] = set()
    num_tokens = 0
    for n, request in enumerate(requests):
        for i, prompt in enumerate(request.prompts):
            request_id = f"warmup-{n}-{i}"
            try:
                engine.add_request(request_id, prompt, params, cache_salt=request.cache_salt)
            except InvalidRequestError as exc:
                for queued in ids:
                    engine.abort_request(queued)
                where = request.origin or f"warm-up line {request.line}"
                raise ConfigError(f"{where}: {exc}") from None
            ids.append(request_id)
            num_tokens += len(prompt)
            hashes.update(prefix_block_hashes(prompt, engine.config.block_size, request.cache_salt))
    cached = finished = 0
    stopped = False
    if on_progress is not None:
        on_progress(0, len(ids))
    while engine.has_unfinished_requests():
        if should_stop is not None and should_stop():
            for request_id in ids:
                engine.abort_request(request_id)  # finished ones are ignored
            stopped = True
            break
        for out in engine.step():
            if out.finished:
                cached += out.num_cached_tokens
                finished += 1
        if on_progress is not None:
            on_progress(finished, len(ids))
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
        num_blocks=len(hashes),
        stopped=stopped,
        num_finished=finished,
    )
