"""Run the synchronous ``LLMEngine`` on one background thread and serve it to asyncio.

::

    event loop (HTTP handlers)                      engine thread
    ─────────────────────────                       ─────────────
    add_request() ──► commands (queue.SimpleQueue) ──► engine.add_request / abort_request
         ▲                                               │
         │  admission future                             ▼
         └──── loop.call_soon_threadsafe ◄──────── engine.step() -> RequestOutputs
    RequestStream (asyncio.Queue per HTTP request) ◄──── grouped per request, once per step

The engine is only ever touched by its own thread, so it needs no locks: handlers talk to it
through one thread-safe command queue, and results come back through a per-request
``asyncio.Queue`` filled with ``loop.call_soon_threadsafe``. Commands are drained between
steps, so an abort frees its KV blocks before the next step is scheduled. While the engine has
no work the thread blocks on the command queue (no busy polling).

TTFT and inter-token latency are measured here, on the engine thread, the moment a step's
outputs are handed over.

Before its first command the thread runs the warm-up, if any (`promptcache.engine.server.warmup`);
``ready`` is set once it has finished (at once without one). When the thread stops it calls
``LLMEngine.close``, which writes the cached blocks to the disk tier when there is one.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from promptcache.errors import EngineError, InvalidRequestError

from ..outputs import EngineStats, RequestOutput
from ..sampling_params import SamplingParams

if TYPE_CHECKING:
    from ..kv_events import KVEventPublisher
    from ..llm_engine import LLMEngine
    from .metrics import EngineMetrics
    from .warmup import WarmupReport, WarmupRequest

__all__ = ["AsyncEngine", "RequestStream", "StreamItem"]

logger = logging.getLogger(__name__)

#: Seconds the idle engine thread waits on the command queue before re-checking for shutdown.
IDLE_WAIT_S = 0.5


@dataclass(frozen=True)
class StreamItem:
    """One sequence's progress: which prompt of the HTTP request it belongs to, and its output."""

    prompt_index: int
    output: RequestOutput


class RequestStream:
    """The outputs of one HTTP request (one or more prompts, ``n`` samples each), in order.

    Iterate with ``async for item in stream``; iteration ends when every sample of every prompt
    has finished. ``abort()`` cancels whatever is still running (idempotent, thread-safe).
    """

    def __init__(self, engine: AsyncEngine, request_ids: list[str], n: int) -> None:
        self.request_ids = request_ids
        self.num_samples = n * len(request_ids)
        self.finished = False
        self._engine = engine
        self._queue: asyncio.Queue[list[StreamItem] | BaseException | None] = asyncio.Queue()

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[StreamItem]:
        while not self.finished:
            batch = await self._queue.get()
            if batch is None:
                self.finished = True
                return
            if isinstance(batch, BaseException):
                self.finished = True
                raise batch
            for item in batch:
                yield item

    def abort(self) -> None:
        """Stop every unfinished sequence of this request and free its KV blocks."""
        if not self.finished:
            self.finished = True
            self._engine.abort(self.request_ids)

    # Called on the event loop by the engine thread (through call_soon_threadsafe).
    def _put(self, item: list[StreamItem] | BaseException | None) -> None:
        self._queue.put_nowait(item)


@dataclass
class _Tracked:
    """Engine-thread bookkeeping for one HTTP request."""

    stream: RequestStream
    loop: asyncio.AbstractEventLoop
    arrival: float  # time.monotonic() when the handler submitted it
    prompt_index: dict[str, int]
    open_samples: int
    last_token_at: dict[tuple[str, int], float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Add:
    stream: RequestStream
    prompts: list[list[int]]
    params: SamplingParams
    cache_salt: str | None
    loop: asyncio.AbstractEventLoop
    admitted: asyncio.Future[None]
    arrival: float


@dataclass(frozen=True)
class _Abort:
    request_ids: list[str]


class AsyncEngine:
    """One ``LLMEngine`` driven by a background thread, fed from asyncio.

    Args:
        engine: the engine; from ``start()`` on, only this object's thread may call it.
        metrics: where TTFT / ITL / request counts are recorded, or None.
        kv_events: publisher of the prefix cache's KV events, or None. The engine thread
            drains the block manager's events after each step (and command batch) and
            publishes them as one batch; the caller closes the publisher.
        warmup: requests to prefill before serving anything (``--warmup``), or None.
        on_warmup_done: called on the engine thread with the `WarmupReport` (or with the
            exception that ended the warm-up), before ``ready`` is set.

    Thread-safety: ``add_request`` is a coroutine for the event loop; ``abort`` and ``stats``
    may be called from any thread.
    """

    def __init__(
        self,
        engine: LLMEngine,
        metrics: EngineMetrics | None = None,
        kv_events: KVEventPublisher | None = None,
        warmup: list[WarmupRequest] | None = None,
        on_warmup_done: Callable[[WarmupReport | BaseException], None] | None = None,
    ) -> None:
        self.engine = engine
        self.warmup = warmup
        self.on_warmup_done = on_warmup_done
        #: Set once the warm-up has finished (at start when there is none).
        self.ready = threading.Event()
        #: What the warm-up did, once it has run.
        self.warmup_report: WarmupReport | None = None
        #: ``(prompts prefilled, prompts)`` of the warm-up once its prompts are queued, else None.
        self.warmup_progress: tuple[int, int] | None = None
        self.metrics = metrics
        self.kv_events = kv_events
        self._kv_recorder = engine.enable_kv_events() if kv_events is not None else None
        self._commands: queue.SimpleQueue[_Add | _Abort | None] = queue.SimpleQueue()
        self._tracked: dict[str, _Tracked] = {}  # engine request id -> its HTTP request
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._stats = engine.stats()
        self._counter = 0
        self.num_requests_in_flight = 0

    # Lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the engine thread (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stopping.clear()
            self._thread = threading.Thread(
                target=self._run, name="promptcache-engine", daemon=True
            )
            self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread after its current step; unfinished requests end with an error."""
        self._stopping.set()
        self._commands.put(None)
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    @property
    def is_alive(self) -> bool:
        """True while the engine thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def stats(self) -> EngineStats:
        """The engine's counters as of the end of its latest step (or command batch)."""
        return self._stats

    # Requests (event loop) ------------------------------------------------------------------

    async def add_request(
        self,
        prompts: Sequence[list[int]],
        params: SamplingParams,
        *,
        cache_salt: str | None = None,
        request_id: str | None = None,
    ) -> RequestStream:
        """Queue one HTTP request's prompts (``params.n`` samples each) and wait for admission.

        All prompts are admitted together or not at all.

        Returns:
            The request's output stream.

        Raises:
            InvalidRequestError: the engine rejected a prompt (too long, cannot fit the pool).
            EngineError: the engine thread is not running.
        """
        if not self.is_alive:
            raise EngineError("the engine thread is not running")
        self._counter += 1
        base = request_id or f"req-{self._counter}"
        ids = [base] if len(prompts) == 1 else [f"{base}-{i}" for i in range(len(prompts))]
        stream = RequestStream(self, ids, params.n)
        loop = asyncio.get_running_loop()
        admitted: asyncio.Future[None] = loop.create_future()
        self._commands.put(
            _Add(stream, list(prompts), params, cache_salt, loop, admitted, time.monotonic())
        )
        try:
            await admitted
        except asyncio.CancelledError:
            stream.abort()
            raise
        return stream

    def abort(self, request_ids: list[str]) -> None:
        """Abort engine requests by id (unknown or finished ids are ignored). Any thread."""
        self._commands.put(_Abort(list(request_ids)))

    # Engine thread --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._run_warmup()
            while not self._stopping.is_set():
                self._drain_commands(block=not self.engine.has_unfinished_requests())
                if self.engine.has_unfinished_requests() and not self._stopping.is_set():
                    self._step()
                self._stats = self.engine.stats()
                if self.kv_events is not None and self._kv_recorder is not None:
                    self.kv_events.publish(self._kv_recorder.take())
        finally:
            error = EngineError("the engine is shutting down; retry against a running server")
            self._fail_tracked(error)
            self._reject_queued(error)
            tiers = self.engine.kv_tiers
            disk = tiers.disk if tiers is not None else None
            held_before = len(disk) if disk is not None else 0
            try:
                written = self.engine.close()
            except Exception:
                logger.exception("writing the cached KV blocks to the disk tier failed")
            else:
                if written:
                    noun = "block" if written == 1 else "blocks"
                    # a --kv-disk-bytes smaller than what the stop writes deletes the blocks used
                    # longest ago as it goes: say how many a restart finds, not only the writes
                    kept = len(disk) if disk is not None else written
                    deleted = held_before + written - kept
                    if deleted > 0:
                        logger.info(
                            "wrote %d cached KV %s to the disk tier, which keeps the %d used last "
                            "within --kv-disk-bytes: the %d used longer ago %s deleted, and a "
                            "restart will not find %s",
                            written,
                            noun,
                            kept,
                            deleted,
                            "was" if deleted == 1 else "were",
                            "it" if deleted == 1 else "them",
                        )
                    else:
                        logger.info("wrote %d cached KV %s to the disk tier", written, noun)
                if tiers is not None and tiers.disk is not None and tiers.flush_failures:
                    total = tiers.flush_failures + written
                    logger.warning(
                        # of the blocks this stop wrote: those already on disk are not counted
                        "could not write %d of the %d cached KV %s not yet on the disk tier %s "
                        "(%s); a restart will not find %s",
                        tiers.flush_failures,
                        total,
                        "block" if total == 1 else "blocks",
                        tiers.disk.dir,
                        tiers.disk.last_write_error,
                        "it" if tiers.flush_failures == 1 else "them",
                    )

    def _run_warmup(self) -> None:
        if not self.warmup or self.ready.is_set():
            self.ready.set()
            return
        from .warmup import run_warmup

        result: WarmupReport | BaseException
        try:
            result = self.warmup_report = run_warmup(
                self.engine,
                self.warmup,
                should_stop=self._stopping.is_set,
                on_progress=self._warmup_progress,
            )
        except Exception as exc:  # reported, and the server serves without the warm-up
            logger.exception("the warm-up failed")
            result = exc
        self._stats = self.engine.stats()
        if self.kv_events is not None and self._kv_recorder is not None:
            self.kv_events.publish(self._kv_recorder.take())
        if self.on_warmup_done is not None:
            self.on_warmup_done(result)  # before ready: the banner line precedes the first 200
        self.ready.set()

    def _warmup_progress(self, prefilled: int, total: int) -> None:
        self.warmup_progress = (prefilled, total)  # one tuple: /health reads it whole

    def _drain_commands(self, block: bool) -> None:
        """Apply every queued command; if ``block``, first wait (bounded) for one to arrive."""
        commands: list[_Add | _Abort | None] = []
        if block:
            try:
                commands.append(self._commands.get(timeout=IDLE_WAIT_S))
            except queue.Empty:
                return
        while True:
            try:
                commands.append(self._commands.get_nowait())
            except queue.Empty:
                break
        for command in commands:
            if isinstance(command, _Add):
                self._apply_add(command)
            elif isinstance(command, _Abort):
                self._apply_abort(command.request_ids)
            # None only wakes the thread up so it sees the stop flag

    def _apply_add(self, command: _Add) -> None:
        stream = command.stream
        added: list[str] = []
        try:
            for request_id, prompt in zip(stream.request_ids, command.prompts, strict=True):
                self.engine.add_request(
                    request_id, prompt, command.params, cache_salt=command.cache_salt
                )
                added.append(request_id)
        except InvalidRequestError as exc:
            for request_id in added:
                self.engine.abort_request(request_id)
            _post(command.loop, _settle, command.admitted, exc)
            return
        tracked = _Tracked(
            stream=stream,
            loop=command.loop,
            arrival=command.arrival,
            prompt_index={rid: i for i, rid in enumerate(stream.request_ids)},
            open_samples=stream.num_samples,
        )
        for request_id in stream.request_ids:
            self._tracked[request_id] = tracked
        self.num_requests_in_flight += 1
        _post(command.loop, _settle, command.admitted, None)

    def _apply_abort(self, request_ids: list[str]) -> None:
        for request_id in request_ids:
            self.engine.abort_request(request_id)
            tracked = self._tracked.pop(request_id, None)
            if tracked is not None and all(t is not tracked for t in self._tracked.values()):
                self._close(tracked, None, "abort")

    def _step(self) -> None:
        try:
            outputs = self.engine.step()
        except Exception as exc:  # a bug, not a user's mistake: fail loudly, keep serving
            logger.exception("engine step failed; failing every request in flight")
            for request_id in list(self._tracked):
                self.engine.abort_request(request_id)
            self._fail_tracked(EngineError(f"the engine failed: {exc}"))
            return
        now = time.monotonic()
        batches: dict[int, tuple[_Tracked, list[StreamItem]]] = {}
        for out in outputs:
            tracked = self._tracked.get(out.request_id)
            if tracked is None:
                continue  # aborted in this step
            self._observe(tracked, out, now)
            entry = batches.setdefault(id(tracked), (tracked, []))
            entry[1].append(StreamItem(tracked.prompt_index[out.request_id], out))
            if out.finished:
                tracked.open_samples -= 1
        for tracked, items in batches.values():
            _post(tracked.loop, tracked.stream._put, items)
            if tracked.open_samples == 0:
                for request_id in tracked.stream.request_ids:
                    self._tracked.pop(request_id, None)
                self._close(tracked, None, "finished")

    def _observe(self, tracked: _Tracked, out: RequestOutput, now: float) -> None:
        """Record TTFT (first token of a sample), inter-token latency and finish reasons."""
        if self.metrics is None:
            return
        if out.new_token_ids:
            key = (out.request_id, out.sample_index)
            last = tracked.last_token_at.get(key)
            if last is None:
                self.metrics.ttft.observe(now - tracked.arrival)
            else:
                gap = (now - last) / len(out.new_token_ids)
                for _ in out.new_token_ids:
                    self.metrics.itl.observe(gap)
            tracked.last_token_at[key] = now
        if out.finished and out.finish_reason is not None:
            self.metrics.sequences_finished.labels(out.finish_reason).inc()

    def _close(self, tracked: _Tracked, error: BaseException | None, outcome: str) -> None:
        """End an HTTP request's stream (``error`` None = normal end)."""
        self.num_requests_in_flight -= 1
        _post(tracked.loop, tracked.stream._put, error)
        if self.metrics is not None:
            self.metrics.request_done(outcome, time.monotonic() - tracked.arrival)

    def _fail_tracked(self, error: BaseException) -> None:
        """End every admitted request's stream with ``error``."""
        seen: set[int] = set()
        for tracked in self._tracked.values():
            if id(tracked) not in seen:
                seen.add(id(tracked))
                self._close(tracked, error, "error")
        self._tracked.clear()

    def _reject_queued(self, error: BaseException) -> None:
        """Fail the admission of requests still in the command queue (shutdown)."""
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            if isinstance(command, _Add):
                _post(command.loop, _settle, command.admitted, error)


def _post(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: object) -> None:
    """Schedule ``callback(*args)`` on ``loop``; a closed loop (server gone) drops it."""
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:
        logger.debug("event loop closed; dropped an engine result")


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    """Resolve an admission future on its loop unless its waiter gave up already."""
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
