"""KV-cache events in vLLM's wire format: which prefix-cache blocks the engine holds.

The block manager reports every block that becomes findable by hash (``BlockStored``), every
cached block it evicts (``BlockRemoved``) and a prefix-cache reset (``AllBlocksCleared``) to a
`KVEventRecorder`; the engine loop drains the recorder once per step and hands the events to a
`KVEventPublisher`, which sends them on a ZeroMQ PUB socket exactly as vLLM does, so external
KV-aware routers (llm-d, NVIDIA Dynamo, our proxy's ``kv_events`` policy) can follow the cache.

Wire format (vLLM ``vllm/distributed/kv_events.py`` and
``examples/online_serving/kv_events_subscriber.py``, https://github.com/vllm-project/vllm,
checked 2026-12-01):

- every published message is multipart ``[topic, seq, payload]``: ``topic`` UTF-8 bytes,
  ``seq`` the batch's sequence number (0, 1, 2, ... per publisher) as 8 bytes big-endian,
  ``payload`` msgpack of ``EventBatch``;
- the structs are msgspec ``Struct`` with ``array_like=True`` (encoded as msgpack arrays in
  field order), ``omit_defaults=True``, ``gc=False``; events carry ``tag=True``, so each event
  array starts with its class name: ``["BlockStored", block_hashes, parent_block_hash,
  token_ids, block_size, lora_id, medium]``, ``["BlockRemoved", block_hashes, medium]``,
  ``["AllBlocksCleared"]``; a batch is ``[ts, events]`` with ``ts`` Unix time in seconds;
- replay: a ROUTER socket; a client sends the first sequence number it wants as 8 bytes
  big-endian (a DEALER frame ``[b"", seq]``) and gets ``[b"", seq, payload]`` for every
  buffered batch from there on, then ``[b"", -1 (8 bytes, signed big-endian), b""]`` (a REQ
  socket takes one reply per request: it reads only the first).

Block hashes: the engine's own hash (`promptcache.engine.block_manager.hash_block_tokens`) is
128 bits; msgpack integers stop at 64 bits, so events carry `external_block_hash` of it, the
low 64 bits as an unsigned int: the same type vLLM publishes by default
(``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``, the digest folded to an unsigned 64-bit int).
``parent_block_hash`` is None for a run that starts at a sequence's first block, as in vLLM.
``token_ids`` holds the tokens of every block in ``block_hashes``, in order
(``len(token_ids) == len(block_hashes) * block_size``). ``lora_id`` is always None (no LoRA).
``medium`` is ``"GPU"``, vLLM's name for the primary KV pool, whatever the device, for the
pool's blocks; the CPU swap pool holds no prefix-cache entries, so it publishes nothing. With
cache tiers (`promptcache.engine.kv_tiers`), a block entering or leaving the RAM tier is
published with ``medium`` ``"CPU"`` (as vLLM's offloading connector publishes its CPU tier) and
the disk tier with ``"DISK"``; a block can be held by several media at once, and each medium's
stores and removals apply to that medium only.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from typing import Any

import msgspec
import zmq

from promptcache.errors import ConfigError

__all__ = [
    "DEFAULT_TOPIC",
    "END_SEQ",
    "MEDIUM_GPU",
    "AllBlocksCleared",
    "BlockRemoved",
    "BlockStored",
    "EventBatch",
    "KVCacheEvent",
    "KVEventBatch",
    "KVEventPublisher",
    "KVEventRecorder",
    "external_block_hash",
]

logger = logging.getLogger(__name__)

MEDIUM_GPU = "GPU"
"""vLLM's ``medium`` for blocks of the primary KV pool."""

DEFAULT_TOPIC = "kv-events"
"""Topic frame of every message (vLLM's example subscribes to this; vLLM's own default is "")."""

END_SEQ = (-1).to_bytes(8, "big", signed=True)
"""Sequence frame that ends a replay answer (its payload frame is empty)."""

_MASK64 = (1 << 64) - 1


def external_block_hash(block_hash: int) -> int:
    """The published form of an engine block hash: its low 64 bits, an unsigned int.

    Args:
        block_hash: a `hash_block_tokens` value (non-negative, below 2**128).

    Returns:
        An int in [0, 2**64), which msgpack encodes as uint64.
    """
    return block_hash & _MASK64


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """One published message: ``ts`` (Unix seconds) and the events of one engine step."""

    ts: float
    events: list[Any]


class KVCacheEvent(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    """Base of the KV-cache events; the tag (first array element) is the class name."""


class BlockStored(KVCacheEvent):
    """Full blocks that became prefix-cache entries, a chain in order.

    ``parent_block_hash`` is the hash of the block before ``block_hashes[0]`` (None: the chain
    starts at the sequence's first block); ``token_ids`` the tokens of all the blocks.
    """

    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None


class BlockRemoved(KVCacheEvent):
    """Cached blocks evicted (their hashes no longer hit)."""

    block_hashes: list[int]
    medium: str | None


class AllBlocksCleared(KVCacheEvent):
    """The whole prefix cache was reset."""


class KVEventBatch(EventBatch):
    """`EventBatch` with the event union spelled out, for decoding."""

    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


class KVEventRecorder:
    """The block manager's event sink (`promptcache.engine.block_manager.BlockEventSink`).

    Buffers events in order until `take`; consecutive stores that continue one chain become one
    `BlockStored`, consecutive removals one `BlockRemoved`. Not thread-safe: the engine thread
    records and takes.

    Args:
        block_size: tokens per block (the ``block_size`` field of every `BlockStored`).
        medium: the ``medium`` field of every event.
    """

    def __init__(self, block_size: int, medium: str | None = MEDIUM_GPU) -> None:
        self.block_size = block_size
        self.medium = medium
        self._events: list[BlockStored | BlockRemoved | AllBlocksCleared] = []

    def block_stored(
        self,
        block_hash: int,
        parent_hash: int | None,
        token_ids: tuple[int, ...],
        medium: str | None = MEDIUM_GPU,
    ) -> None:
        """A full block became findable by ``block_hash`` (engine hashes, 128-bit ints) in
        ``medium`` (the pool's "GPU" unless a cache tier says otherwise)."""
        medium = self.medium if medium == MEDIUM_GPU else medium
        digest = external_block_hash(block_hash)
        last = self._events[-1] if self._events else None
        if (
            parent_hash is not None
            and isinstance(last, BlockStored)
            and last.medium == medium
            and last.block_hashes[-1] == external_block_hash(parent_hash)
        ):
            last.block_hashes.append(digest)
            last.token_ids.extend(token_ids)
            return
        parent = None if parent_hash is None else external_block_hash(parent_hash)
        self._events.append(
            BlockStored([digest], parent, list(token_ids), self.block_size, None, medium)
        )

    def block_removed(self, block_hash: int, medium: str | None = MEDIUM_GPU) -> None:
        """A cached block left ``medium``: ``block_hash`` no longer hits there."""
        medium = self.medium if medium == MEDIUM_GPU else medium
        last = self._events[-1] if self._events else None
        if isinstance(last, BlockRemoved) and last.medium == medium:
            last.block_hashes.append(external_block_hash(block_hash))
        else:
            self._events.append(BlockRemoved([external_block_hash(block_hash)], medium))

    def all_blocks_cleared(self) -> None:
        """Every cached hash was forgotten."""
        self._events.append(AllBlocksCleared())

    def take(self) -> list[BlockStored | BlockRemoved | AllBlocksCleared]:
        """The events recorded since the last call, oldest first (empties the buffer)."""
        events, self._events = self._events, []
        return events


class KVEventPublisher:
    """Publish `EventBatch` messages on a ZeroMQ PUB socket, with a replay ROUTER socket.

    Both sockets *bind* (the engine is the stable end; subscribers connect), unlike vLLM, which
    binds only for a wildcard address (``tcp://*:5557``) and otherwise connects. One background
    thread owns both sockets (ZeroMQ sockets are not thread-safe): it encodes and sends what
    `publish` queues, keeps the last ``buffer_steps`` payloads, and answers replay requests.

    Args:
        endpoint: PUB address, e.g. ``tcp://127.0.0.1:5557`` or ``ipc:///tmp/kv.sock``.
        replay_endpoint: ROUTER address for replay requests, or None for no replay.
        topic: first frame of every message.
        buffer_steps: batches kept for replay (older ones are dropped).

    Raises:
        ConfigError: an endpoint ZeroMQ cannot bind (malformed, address in use, not local).
    """

    def __init__(
        self,
        endpoint: str,
        replay_endpoint: str | None = None,
        *,
        topic: str = DEFAULT_TOPIC,
        buffer_steps: int = 10_000,
    ) -> None:
        if buffer_steps < 1:
            raise ConfigError(f"buffer_steps must be >= 1, got {buffer_steps}")
        self.topic = topic
        self._topic = topic.encode("utf-8")
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self._pub = self._bind(zmq.PUB, endpoint, "--kv-events-endpoint")
        self._replay: zmq.Socket[bytes] | None = None
        if replay_endpoint is not None:
            try:
                option = "--kv-events-replay-endpoint"
                self._replay = self._bind(zmq.ROUTER, replay_endpoint, option)
            except ConfigError:
                self._pub.close(linger=0)
                raise
        self.endpoint = self._pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.replay_endpoint = (
            self._replay.getsockopt_string(zmq.LAST_ENDPOINT) if self._replay is not None else None
        )
        self._queue: queue.SimpleQueue[list[Any] | None] = queue.SimpleQueue()
        self._buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer_steps)
        self._next_seq = 0
        self._encoder = msgspec.msgpack.Encoder()
        self._thread = threading.Thread(target=self._run, name="promptcache-kv-events", daemon=True)
        self._thread.start()

    def _bind(self, kind: int, endpoint: str, option: str) -> zmq.Socket[bytes]:
        sock: zmq.Socket[bytes] = self._ctx.socket(kind)
        try:
            sock.bind(endpoint)
        except zmq.ZMQError as exc:
            sock.close(linger=0)
            raise ConfigError(
                f"cannot bind the KV events socket {endpoint!r} ({option}): {exc}; give a free "
                "local address such as tcp://127.0.0.1:5557 or ipc:///tmp/kv-events.sock"
            ) from None
        return sock

    @property
    def num_published(self) -> int:
        """Batches sent so far (the next batch's sequence number)."""
        return self._next_seq

    def publish(self, events: list[Any]) -> None:
        """Queue one batch (``ts`` = now); any thread. An empty list publishes nothing."""
        if events:
            self._queue.put(events)

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued, stop the thread and close both sockets (idempotent)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout_s)
        for sock in (self._pub, self._replay):
            if sock is not None and not sock.closed:
                sock.close(linger=0)

    def _run(self) -> None:
        while True:
            if self._replay is not None:
                while self._replay.poll(0):
                    self._serve_replay(self._replay)
            try:
                events = self._queue.get(timeout=0.05)
            except queue.Empty:
                continue
            if events is None:
                return
            payload = self._encoder.encode(EventBatch(time.time(), events))
            seq = self._next_seq.to_bytes(8, "big")
            self._pub.send_multipart((self._topic, seq, payload))
            self._buffer.append((self._next_seq, payload))
            self._next_seq += 1

    def _serve_replay(self, sock: zmq.Socket[bytes]) -> None:
        frames = sock.recv_multipart()
        if len(frames) != 3 or len(frames[2]) != 8:
            logger.warning("ignored a malformed KV-event replay request (%d frames)", len(frames))
            return
        client, delimiter, start = frames
        first = int.from_bytes(start, "big")
        for seq, payload in list(self._buffer):
            if seq >= first:
                sock.send_multipart((client, delimiter, seq.to_bytes(8, "big"), payload))
        sock.send_multipart((client, delimiter, END_SEQ, b""))
