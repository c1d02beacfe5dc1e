"""A KV-event subscriber written the way vLLM's example writes one, for the tests.

The structs are declared as in vLLM's ``examples/online_serving/kv_events_subscriber.py``
(https://github.com/vllm-project/vllm, checked 2026-12-01), independently of
``promptcache.engine.kv_events``: decoding our stream with them is the compatibility check.
Replay uses a DEALER socket (the ROUTER answers one request with many messages).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import zmq

from promptcache.engine.block_manager import NONE_HASH, hash_block_tokens


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]


class KVCacheEvent(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    """Base class for all KV cache-related events"""


class BlockStored(KVCacheEvent):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[int]
    medium: str | None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


END_SEQ = (-1).to_bytes(8, "big", signed=True)


class Subscriber:
    """SUB + DEALER sockets; keeps every batch by sequence number, replaying gaps."""

    def __init__(self, endpoint: str, replay_endpoint: str, topic: str = "kv-events") -> None:
        ctx = zmq.Context.instance()
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt_string(zmq.SUBSCRIBE, topic)
        self.sub.connect(endpoint)
        self.replay = ctx.socket(zmq.DEALER)
        self.replay.connect(replay_endpoint)
        self.decoder = msgspec.msgpack.Decoder(type=KVEventBatch)
        self.topic = topic.encode()
        self.next_seq = 0
        self.batches: list[KVEventBatch] = []
        self.num_live = 0
        self.num_replayed = 0

    def close(self) -> None:
        self.sub.close(linger=0)
        self.replay.close(linger=0)

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def catch_up(self, start: int | None = None) -> list[int]:
        """Ask for every buffered batch from ``start`` (default: the next one we lack).

        Returns the sequence numbers the publisher sent back, in order.
        """
        first = self.next_seq if start is None else start
        self.replay.send_multipart([b"", first.to_bytes(8, "big")])
        got: list[int] = []
        while True:
            assert self.replay.poll(10_000), "no replay answer"
            delimiter, seq_bytes, payload = self.replay.recv_multipart()
            assert delimiter == b""
            if seq_bytes == END_SEQ:
                assert payload == b""
                return got
            seq = int.from_bytes(seq_bytes, "big")
            got.append(seq)
            if seq == self.next_seq:
                self.batches.append(self.decoder.decode(payload))
                self.next_seq += 1
                self.num_replayed += 1

    def receive(self, count: int, timeout_s: float = 20.0) -> None:
        """Read the live stream until batches 0..count-1 are held (gaps replayed)."""
        deadline = time.monotonic() + timeout_s
        while self.next_seq < count:
            assert time.monotonic() < deadline, f"have {self.next_seq} of {count} batches"
            if not self.sub.poll(500):
                self.catch_up()  # nothing live for a while: the tail may have been missed
                continue
            topic, seq_bytes, payload = self.sub.recv_multipart()
            assert topic == self.topic and len(seq_bytes) == 8
            seq = int.from_bytes(seq_bytes, "big")
            if seq > self.next_seq:
                self.catch_up()
            if seq == self.next_seq:
                self.batches.append(self.decoder.decode(payload))
                self.next_seq += 1
                self.num_live += 1


def held_blocks(batches: list[KVEventBatch]) -> set[int]:
    """The block hashes a consumer believes the engine holds after applying ``batches``."""
    held: set[int] = set()
    for batch in batches:
        for event in batch.events:
            if isinstance(event, BlockStored):
                held.update(event.block_hashes)
            elif isinstance(event, BlockRemoved):
                held.difference_update(event.block_hashes)
            else:
                held.clear()
    return held


def rebuild_hashes(batches: list[KVEventBatch]) -> int:
    """Recompute every stored block's hash from its token_ids and parent (unsalted blocks).

    Asserts each equals the published hash (the low 64 bits of ``hash_block_tokens``); returns
    how many blocks were checked.
    """
    full: dict[int, int] = {}  # published hash -> full 128-bit engine hash
    checked = 0
    for batch in batches:
        for event in batch.events:
            if not isinstance(event, BlockStored):
                continue
            size = event.block_size
            assert len(event.token_ids) == len(event.block_hashes) * size
            parent = NONE_HASH if event.parent_block_hash is None else full[event.parent_block_hash]
            for i, published in enumerate(event.block_hashes):
                parent = hash_block_tokens(parent, event.token_ids[i * size : (i + 1) * size])
                assert parent & (2**64 - 1) == published
                full[published] = parent
                checked += 1
    return checked
