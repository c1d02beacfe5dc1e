"""Which KV blocks each replica holds, followed from the replicas' KV-event streams.

Every replica publishes vLLM-format KV events (``promptcache engine serve
--kv-events-endpoint``, or vLLM with ``--kv-events-config``; the format is described in
``promptcache.engine.kv_events``). `KVEventFeed` subscribes to all of them from one background
thread and keeps a `ReplicaBlocks` per replica; `PromptHasher` turns a request body into the
block hashes the engine would compute for it; `ReplicaBlocks.leading_blocks` answers "how many
leading blocks of this request does the replica hold".

Exact for our engine: the proxy tokenises the body with the engine's own request parser
(`promptcache.engine.server.protocol`: same chat template, same special-token rules), with the
same tokenizer files, and hashes the tokens with the engine's function
(`promptcache.engine.block_manager.prefix_block_hashes`, salt included), so the hashes are the
ones the replica published. A replica is recognised as ours ("native") the first time a stored
block's published hash equals our hash of its ``token_ids``.

Approximate for other engines (vLLM, SGLang): their hashes differ from ours (vLLM: SHA-256 of
CBOR-encoded tokens with a per-deployment ``PYTHONHASHSEED``-dependent or random seed, folded to
64 bits), so for each stored block the feed rebuilds *our* hash from its ``token_ids`` and the
parent's rebuilt hash, and maps theirs to ours (removals use the map). That is exact for
identical tokenisation and breaks, silently (fewer matches, never errors), when:

- the proxy's tokenizer or chat template differs from the replica's (another model revision,
  a server-side ``--chat-template``, different special-token handling);
- the request is multimodal (image/audio placeholders hash extra keys that token_ids omit);
- a block belongs to a LoRA adapter (``lora_id`` set: skipped, base-model requests cannot hit
  it) or has a ``medium`` other than the primary pool ("GPU"; offloaded tiers are skipped);
- the request has a ``cache_salt`` (vLLM hashes it into block 0; the rebuilt hashes cannot, so
  salted requests are matched as if unsalted);
- the feed saw a block's child before its parent (a gap that replay could not fill): the child
  cannot be rebuilt.

Consistency: batches are applied in sequence order. A gap, a fresh subscription and a
replica that left the rotation all trigger a replay request (the engine's ``--kv-events-
replay-endpoint``) from the first missing batch; without a replay endpoint, or when the
replica's replay buffer no longer reaches back, the state misses what happened before and
`ReplicaBlocks.complete` turns False. A sequence number lower than expected on the live stream
means the replica restarted: its state is cleared.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import zmq

from promptcache.engine.block_manager import NONE_HASH, hash_block_tokens
from promptcache.engine.kv_events import (
    DEFAULT_TOPIC,
    END_SEQ,
    MEDIUM_GPU,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEventBatch,
    external_block_hash,
)
from promptcache.errors import ConfigError, ModelLoadError, PromptCacheError

from .token_cache import BlockHashCache, CachingTokenizer, Encoded

__all__ = ["KVEventFeed", "PromptHasher", "ReplicaBlocks", "ReplicaEndpoints", "leading_count"]

logger = logging.getLogger(__name__)

#: Seconds a replay request may go unanswered before it is given up (and asked again later).
REPLAY_TIMEOUT_S = 5.0
#: Block size assumed until a replica's first BlockStored says otherwise (vLLM's and ours).
DEFAULT_BLOCK_SIZE = 16
#: Model names whose parsing context `PromptHasher` keeps (cleared when full).
MAX_CONTEXTS = 64


class ReplicaBlocks:
    """The blocks one replica holds, as its events describe them.

    Attributes:
        block_size: tokens per block, from the replica's latest ``BlockStored`` (None before).
        native: the replica hashes blocks as our engine does (its hashes are used as sent).
        complete: every batch since the replica's first was applied (else the state misses
            what happened before the oldest batch the replay buffer still held).
        next_seq: the sequence number of the next batch expected.
        num_batches: batches applied (a count, for tests and logs).

    Updated only by the feed's thread; read from any thread (membership tests on sets that
    are replaced, never cleared in place, so a reader never sees a half-cleared state).
    """

    def __init__(self) -> None:
        self.block_size: int | None = None
        self.native = False
        self.complete = True
        self.next_seq = 0
        self.num_batches = 0
        self.published: set[int] = set()
        # Foreign engines: their hash -> our rebuilt full hash, and our 64-bit hashes held.
        self._ours: dict[int, int] = {}
        self._rebuilt: Counter[int] = Counter()

    @property
    def num_blocks(self) -> int:
        """Blocks the replica holds (a count)."""
        return len(self.published)

    def clear(self) -> None:
        """Forget every block (AllBlocksCleared, or the replica restarted)."""
        self.published = set()
        self._ours = {}
        self._rebuilt = Counter()

    def apply(self, batch: KVEventBatch) -> None:
        """Apply one batch's events in order."""
        for event in batch.events:
            if isinstance(event, AllBlocksCleared):
                self.clear()
            elif event.medium not in (None, MEDIUM_GPU):
                continue  # an offload tier: not a prefix-cache hit on the device
            elif isinstance(event, BlockStored):
                if event.lora_id is None:
                    self._stored(event)
            else:
                self._removed(event)
        self.num_batches += 1

    def _stored(self, event: BlockStored) -> None:
        self.block_size = size = event.block_size
        self.published.update(event.block_hashes)
        if self.native:
            return
        parent: int | None = NONE_HASH
        if event.parent_block_hash is not None:
            parent = self._ours.get(event.parent_block_hash)
        for i, theirs in enumerate(event.block_hashes):
            if parent is None:
                return  # the parent's tokens were never seen: cannot rebuild this chain
            parent = hash_block_tokens(parent, event.token_ids[i * size : (i + 1) * size])
            if external_block_hash(parent) == theirs:
                self._become_native()
                return
            if theirs not in self._ours:
                self._rebuilt[external_block_hash(parent)] += 1
            self._ours[theirs] = parent

    def _removed(self, event: BlockRemoved) -> None:
        self.published.difference_update(event.block_hashes)
        for theirs in event.block_hashes:
            ours = self._ours.pop(theirs, None)
            if ours is not None:
                key = external_block_hash(ours)
                self._rebuilt[key] -= 1
                if self._rebuilt[key] <= 0:
                    del self._rebuilt[key]

    def _become_native(self) -> None:
        self.native = True
        self._ours = {}
        self._rebuilt = Counter()

    def leading_blocks(self, salted: Sequence[int], unsalted: Sequence[int]) -> int:
        """How many leading blocks of a request this replica holds (a count of blocks).

        Args:
            salted: the request's published-form block hashes (`PromptHasher.hashes`: 64-bit
                `external_block_hash` values) with its cache salt.
            unsalted: the same without the salt (equal to ``salted`` when it has none); used
                for foreign engines, whose rebuilt hashes cannot include a salt.
        """
        held: Collection[int] = self.published if self.native else self._rebuilt.keys()
        return leading_count(salted if self.native else unsalted, held.__contains__)


def leading_count(hashes: Iterable[int], holds: Callable[[int], bool]) -> int:
    """How many of ``hashes``, from the first, satisfy ``holds`` (stops at the first miss)."""
    return len(list(itertools.takewhile(holds, hashes)))  # no Python frame per hash


class PromptHasher:
    """The block hashes our engine computes for an OpenAI chat or completions body.

    Args:
        tokenizer: the replicas' checkpoint directory (``tokenizer.json``,
            ``tokenizer_config.json``; weights are not read).
        chat_template: Jinja source the replicas were started with (``--chat-template``), or
            None for the checkpoint's own.

    Raises:
        ConfigError: the tokenizer cannot be loaded (the message names the path).
    """

    def __init__(self, tokenizer: str | Path, chat_template: str | None = None) -> None:
        from promptcache.engine.tokenizer import Tokenizer

        try:
            engine_tokenizer = Tokenizer.from_pretrained(Path(tokenizer).expanduser())
            if chat_template is not None:
                engine_tokenizer.set_chat_template(chat_template)
        except ModelLoadError as exc:
            raise ConfigError(f"kv_events tokenizer {str(tokenizer)!r}: {exc}") from None
        #: the engine's tokenizer, behind the piece cache when its probe passes
        #: (``token_cache.py``: a repeat prompt is tokenised by its new tail only)
        self.tokenizer: Any = CachingTokenizer.for_tokenizer(engine_tokenizer) or engine_tokenizer
        self.block_hashes = BlockHashCache()
        self._vocab_size = int(engine_tokenizer.vocab_size)
        self._contexts: dict[str, Any] = {}  # model name -> the parser's ServingContext

    def prompt(self, api: str | None, body: Mapping[str, Any]) -> tuple[list[int], str | None]:
        """(token ids, cache salt) of the body's (first) prompt, as the engine parses it.

        Raises:
            PromptCacheError: the engine would reject the body (it is answered 400 there).
        """
        from promptcache.engine.server.protocol import parse_chat_request, parse_completion_request

        model = body.get("model")
        ctx = self._contexts.get(model) if isinstance(model, str) else None
        if ctx is None:
            ctx = self._context(model)
        if api == "openai_completions":
            completion = parse_completion_request(dict(body), ctx)
            return completion.prompts[0], completion.cache_salt
        chat = parse_chat_request(dict(body), ctx)
        return chat.prompt, chat.cache_salt

    def _context(self, model: object) -> Any:
        """The engine parser's ServingContext for a body naming ``model`` (kept per name)."""
        from promptcache.engine.server.protocol import ServingContext

        name = model if isinstance(model, str) and model else "model"
        ctx = ServingContext(
            model_names=(name,),
            tokenizer=self.tokenizer,
            max_model_len=2**31 - 1,
            vocab_size=self._vocab_size,
        )
        if isinstance(model, str):
            if len(self._contexts) >= MAX_CONTEXTS:
                self._contexts.clear()
            self._contexts[model] = ctx
        return ctx

    def hashes(
        self, api: str | None, body: Mapping[str, Any], block_size: int
    ) -> tuple[list[int], list[int]] | None:
        """(salted, unsalted) hashes of the blocks the engine could serve from its cache.

        In the published form (`external_block_hash`: the low 64 bits of the engine's
        `prefix_block_hashes`, computed through `BlockHashCache`). Only the first
        ``(len(prompt) - 1) // block_size`` blocks count:
        the engine always recomputes the prompt's last token. None when the body cannot be
        parsed. When the tokenizer cache tokenised the prompt against a recent one, the blocks
        both share whole take that prompt's hashes, and only the rest are looked up.
        """
        try:
            tokens, salt = self.prompt(api, body)
        except PromptCacheError:
            return None
        count = max(0, (len(tokens) - 1) // block_size)
        encoded: Encoded | None = getattr(self.tokenizer, "last_encoded", None)
        if encoded is not None and encoded.tokens is not tokens:
            encoded = None  # another prompt of the body (a completions batch)
        salted = self._chain(tokens, block_size, salt, count, encoded)
        if salt is None:
            return salted, salted
        return salted, self._chain(tokens, block_size, None, count, encoded)

    def _chain(
        self,
        tokens: list[int],
        block_size: int,
        salt: str | None,
        count: int,
        encoded: Encoded | None,
    ) -> list[int]:
        """The published hashes of the first ``count`` blocks, from the recent prompt's chain
        as far as ``encoded`` says the tokens are the same (kept on the prompt's entry)."""
        full: list[int] = []
        published: list[int] = []
        if encoded is None:
            self.block_hashes.extend(tokens, block_size, salt, count, full, published)
            return published
        key = (block_size, salt, encoded.specials)
        prior = encoded.prior
        chain = None if prior is None else prior.chains.get(key)
        if chain is not None:
            kept = min(encoded.shared // block_size, len(chain[0]), count)
            full = chain[0][:kept]
            published = chain[1][:kept]
        self.block_hashes.extend(tokens, block_size, salt, count, full, published)
        encoded.prompt.chains[key] = (full, published)
        return list(published)  # the kept list stays the entry's


@dataclass(frozen=True)
class ReplicaEndpoints:
    """Where one replica publishes: its PUB endpoint and, optionally, its replay endpoint."""

    endpoint: str
    replay_endpoint: str | None = None


class _Link:
    """The sockets and replay bookkeeping of one replica (feed thread only)."""

    def __init__(self, ctx: zmq.Context[zmq.Socket[bytes]], where: ReplicaEndpoints, topic: str):
        self.sub: zmq.Socket[bytes] = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode("utf-8"))
        self.sub.connect(where.endpoint)
        self.replay: zmq.Socket[bytes] | None = None
        if where.replay_endpoint is not None:
            self.replay = ctx.socket(zmq.DEALER)
            self.replay.connect(where.replay_endpoint)
        self.replay_sent_at: float | None = None
        self.pending: dict[int, bytes] = {}  # live batches past a gap, by sequence number
        self.last_live = -1  # sequence number of the latest live batch

    def close(self) -> None:
        self.sub.close(linger=0)
        if self.replay is not None:
            self.replay.close(linger=0)


class KVEventFeed:
    """Subscribe to every replica's KV events on one background thread.

    Args:
        endpoints: one `ReplicaEndpoints` per replica, in the upstream's replica order.
        topic: the topic prefix to subscribe to (the engine's ``--kv-events-topic``).

    ``start`` connects and asks each replica with a replay endpoint for everything since its
    first batch; ``stop`` closes the sockets. ``blocks[i]`` is replica ``i``'s state.
    """

    def __init__(self, endpoints: Sequence[ReplicaEndpoints], topic: str = DEFAULT_TOPIC) -> None:
        self.endpoints = list(endpoints)
        self.topic = topic
        self.blocks = [ReplicaBlocks() for _ in self.endpoints]
        self._decoder = msgspec.msgpack.Decoder(type=KVEventBatch)
        self._resets: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self) -> None:
        """Start the thread; returns once every socket is connected (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="promptcache-kv-feed", daemon=True
            )
            self._thread.start()
            self._ready.wait(10)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and close its sockets."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def reset(self, replica: int) -> None:
        """Forget replica ``replica``'s blocks and rebuild them by replay (it left the rotation:
        it may have restarted). Any thread."""
        self._resets.put(replica)

    def block_size(self) -> int:
        """The block size the replicas announce (the first known), else 16."""
        for blocks in self.blocks:
            if blocks.block_size is not None:
                return blocks.block_size
        return DEFAULT_BLOCK_SIZE

    # Feed thread -------------------------------------------------------------------------

    def _run(self) -> None:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        links = [_Link(ctx, where, self.topic) for where in self.endpoints]
        poller = zmq.Poller()
        owner: dict[zmq.Socket[bytes], tuple[int, bool]] = {}
        for i, link in enumerate(links):
            poller.register(link.sub, zmq.POLLIN)
            owner[link.sub] = (i, False)
            if link.replay is not None:
                poller.register(link.replay, zmq.POLLIN)
                owner[link.replay] = (i, True)
                self._ask_replay(i, link)
        self._ready.set()
        try:
            while not self._stopping.is_set():
                self._apply_resets(links)
                for sock, _ in poller.poll(100):
                    i, is_replay = owner[sock]
                    if is_replay:
                        self._on_replay(i, links[i], sock.recv_multipart())
                    else:
                        self._on_live(i, links[i], sock.recv_multipart())
                now = time.monotonic()
                for i, link in enumerate(links):
                    sent = link.replay_sent_at
                    if sent is not None and now - sent > REPLAY_TIMEOUT_S:
                        link.replay_sent_at = None  # unanswered (replica down?): ask again later
                        if link.pending:
                            self._ask_replay(i, link)
        finally:
            for link in links:
                link.close()

    def _apply_resets(self, links: list[_Link]) -> None:
        while True:
            try:
                i = self._resets.get_nowait()
            except queue.Empty:
                return
            self.blocks[i].clear()
            self.blocks[i].next_seq = 0
            links[i].pending.clear()
            links[i].last_live = -1
            self._ask_replay(i, links[i])

    def _ask_replay(self, i: int, link: _Link) -> None:
        if link.replay is None or link.replay_sent_at is not None:
            return
        try:
            start = self.blocks[i].next_seq.to_bytes(8, "big")
            link.replay.send_multipart([b"", start], flags=zmq.NOBLOCK)
        except zmq.Again:
            return  # no connection yet: asked again on the next gap or reset
        link.replay_sent_at = time.monotonic()

    def _on_live(self, i: int, link: _Link, frames: list[bytes]) -> None:
        if len(frames) != 3 or len(frames[1]) != 8:
            logger.warning("replica %d sent a malformed KV-event message", i)
            return
        state = self.blocks[i]
        seq = int.from_bytes(frames[1], "big")
        if seq <= link.last_live:  # the live stream never goes back unless the replica restarted
            logger.info("replica %d restarted its KV events (seq %d): cleared its blocks", i, seq)
            state.clear()
            state.next_seq = 0
            state.complete = True
            link.pending.clear()
        link.last_live = seq
        if seq < state.next_seq:
            return  # already applied from a replay answer
        if seq == state.next_seq and not link.pending:
            self._apply(i, frames[2])
            return
        link.pending[seq] = frames[2]
        if link.replay is None:
            self._skip_gap(i, link)
        else:
            self._ask_replay(i, link)

    def _on_replay(self, i: int, link: _Link, frames: list[bytes]) -> None:
        if len(frames) != 3:
            return
        _, seq_bytes, payload = frames
        state = self.blocks[i]
        if seq_bytes == END_SEQ:
            link.replay_sent_at = None
            self._drain_pending(i, link)
            if link.pending:  # the replay buffer no longer reaches back to the gap
                self._skip_gap(i, link)
            return
        seq = int.from_bytes(seq_bytes, "big")
        if seq > state.next_seq:
            state.complete = False  # older batches are gone from the replica's buffer
            state.next_seq = seq
        if seq == state.next_seq:
            self._apply(i, payload)

    def _drain_pending(self, i: int, link: _Link) -> None:
        state = self.blocks[i]
        for seq in sorted(link.pending):
            if seq < state.next_seq:
                del link.pending[seq]
            elif seq == state.next_seq:
                self._apply(i, link.pending.pop(seq))

    def _skip_gap(self, i: int, link: _Link) -> None:
        """Give up on missing batches: continue from the oldest live one held."""
        state = self.blocks[i]
        state.complete = False
        state.next_seq = min(link.pending)
        self._drain_pending(i, link)

    def _apply(self, i: int, payload: bytes) -> None:
        state = self.blocks[i]
        try:
            batch = self._decoder.decode(payload)
        except msgspec.DecodeError as exc:
            logger.warning("replica %d sent a KV-event batch we cannot decode: %s", i, exc)
        else:
            state.apply(batch)
        state.next_seq += 1
