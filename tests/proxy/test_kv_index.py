"""The proxy's KV-event feed: it follows an engine's cache exactly, and a foreign engine's by
rebuilding our hashes from the token ids it publishes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from promptcache.engine import LLMEngine, SamplingParams
from promptcache.engine.kv_events import (
    BlockRemoved,
    BlockStored,
    KVEventPublisher,
    external_block_hash,
)
from promptcache.engine.sequence import Sequence
from promptcache.errors import ConfigError
from promptcache.proxy.routing.kv_index import KVEventFeed, PromptHasher, ReplicaEndpoints

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
BLOCK_SIZE = 4
SYSTEMS = [
    "You tell short stories about a little girl named Lily and her red ball in the park.",
    "You answer questions about dogs, cats and birds that live on a small farm by a river.",
    "You write poems about the sea, the moon and the stars over a quiet fishing town.",
]


def _chat(system: str, user: str, salt: str | None = None) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "tiny",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "max_tokens": 2,
        "temperature": 0,
    }
    if salt is not None:
        body["cache_salt"] = salt
    return body


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class _Foreign:
    """Re-publish an engine's events under other hash values, as vLLM's own hashes would be."""

    def __init__(self) -> None:
        self.publisher = KVEventPublisher("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
        self.num_removed = 0

    @staticmethod
    def _theirs(h: int) -> int:
        return (h * 0x9E3779B97F4A7C15 + 12345) & (2**64 - 1)

    def publish(self, events: list[object]) -> None:
        out: list[object] = []
        for e in events:
            if isinstance(e, BlockStored):
                parent = None if e.parent_block_hash is None else self._theirs(e.parent_block_hash)
                hashes = [self._theirs(h) for h in e.block_hashes]
                out.append(BlockStored(hashes, parent, e.token_ids, e.block_size, None, "GPU"))
            elif isinstance(e, BlockRemoved):
                self.num_removed += len(e.block_hashes)
                out.append(BlockRemoved([self._theirs(h) for h in e.block_hashes], "GPU"))
            else:
                out.append(e)
        self.publisher.publish(out)


@pytest.fixture
def fleet() -> Iterator[tuple[LLMEngine, KVEventPublisher, _Foreign]]:
    engine = LLMEngine.from_pretrained(
        TINYSTORIES, dtype="float32", num_blocks=40, block_size=BLOCK_SIZE, max_num_seqs=2
    )
    engine.tokenizer.set_chat_template(TEMPLATE)
    ours = KVEventPublisher("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
    foreign = _Foreign()
    yield engine, ours, foreign
    ours.close()
    foreign.publisher.close()


def _serve(
    engine: LLMEngine, hasher: PromptHasher, bodies: list[dict[str, object]], sinks: list[object]
) -> int:
    """Run each body through the engine as the server would; publish every step's events to
    each sink. Returns the batches published."""
    recorder = engine.scheduler.block_manager.event_sink or engine.enable_kv_events()
    batches = 0
    for i, body in enumerate(bodies):
        tokens, salt = hasher.prompt("openai_chat", body)
        engine.add_request(f"q{i}", tokens, SamplingParams(max_tokens=2), cache_salt=salt)
        while engine.has_unfinished_requests():
            engine.step()
            events = recorder.take()  # type: ignore[attr-defined]
            if events:
                for sink in sinks:
                    sink.publish(events)  # type: ignore[attr-defined]
                batches += 1
    return batches


def _cached_blocks(engine: LLMEngine, tokens: list[int], salt: str | None) -> int:
    """Leading blocks the engine would serve from its cache for this prompt (its own count)."""
    seq = Sequence("probe", tokens, SamplingParams(), cache_salt=salt)
    return engine.scheduler.block_manager.match_prefix(seq).num_cached_tokens // BLOCK_SIZE


def test_the_feed_follows_our_engine_exactly_and_a_foreign_one_by_tokens(
    fleet: tuple[LLMEngine, KVEventPublisher, _Foreign],
) -> None:
    engine, ours, foreign = fleet
    hasher = PromptHasher(TINYSTORIES, TEMPLATE)
    early = [_chat(SYSTEMS[0], "Tell me a story."), _chat(SYSTEMS[1], "What do cats eat?")]
    # Events published before the proxy subscribes: the replay socket brings them.
    before = _serve(engine, hasher, early, [ours, foreign])
    feed = KVEventFeed(
        [
            ReplicaEndpoints(ours.endpoint, ours.replay_endpoint),
            ReplicaEndpoints(foreign.publisher.endpoint, foreign.publisher.replay_endpoint),
        ]
    )
    feed.start()
    try:
        later = [
            _chat(SYSTEMS[2], "A poem, please."),
            _chat(SYSTEMS[0], "Another story.", salt="tenant-a"),
            _chat(SYSTEMS[0], "One more story."),
            _chat(SYSTEMS[1], "Do birds swim?"),
        ] * 2
        total = before + _serve(engine, hasher, later, [ours, foreign])
        _wait(lambda: all(b.next_seq == total for b in feed.blocks), "both feeds to catch up")
        native, rebuilt = feed.blocks
        expected = {
            external_block_hash(h) for h in engine.scheduler.block_manager.cached_block_hashes()
        }
        assert foreign.num_removed > 0, "the workload must evict blocks"
        assert engine.stats().prefix_cache_hits_tokens > 0 and native.published == expected
        assert native.native and not rebuilt.native and native.complete and rebuilt.complete
        assert feed.block_size() == BLOCK_SIZE

        probes = [
            _chat(SYSTEMS[0], "Tell me a story."),
            _chat(SYSTEMS[0], "Something new entirely."),
            _chat(SYSTEMS[2], "A poem, please."),
            _chat("A system prompt nobody has sent.", "Hello."),
            _chat(SYSTEMS[0], "Another story.", salt="tenant-a"),
            _chat(SYSTEMS[0], "Another story.", salt="tenant-z"),
        ]
        counts = []
        for body in probes:
            tokens, salt = hasher.prompt("openai_chat", body)
            hashes = hasher.hashes("openai_chat", body, BLOCK_SIZE)
            assert hashes is not None
            engine_count = _cached_blocks(engine, tokens, salt)
            assert native.leading_blocks(*hashes) == engine_count
            counts.append(engine_count)
            if salt is None:  # rebuilt hashes cannot carry a salt
                assert rebuilt.leading_blocks(*hashes) == engine_count
        # Every chat shares the first block ("system:"); another tenant's salt shares nothing.
        assert counts[5] == 0 < counts[3] < min(counts[1], counts[2], counts[4])
    finally:
        feed.stop()


def test_a_replica_that_restarts_or_is_reset_is_rebuilt(
    fleet: tuple[LLMEngine, KVEventPublisher, _Foreign],
) -> None:
    engine, ours, _ = fleet
    hasher = PromptHasher(TINYSTORIES, TEMPLATE)
    feed = KVEventFeed([ReplicaEndpoints(ours.endpoint, ours.replay_endpoint)])
    feed.start()
    try:
        total = _serve(engine, hasher, [_chat(SYSTEMS[0], "Hi.")], [ours])
        _wait(lambda: feed.blocks[0].next_seq == total, "the feed")
        held = set(feed.blocks[0].published)
        assert held
        feed.reset(0)  # the router saw the replica leave the rotation
        _wait(lambda: feed.blocks[0].next_seq == total, "the replay after the reset")
        assert feed.blocks[0].published == held
    finally:
        feed.stop()


def test_hasher_errors() -> None:
    with pytest.raises(ConfigError, match="kv_events tokenizer"):
        PromptHasher("/nonexistent/model")
    hasher = PromptHasher(TINYSTORIES, TEMPLATE)
    assert hasher.hashes("openai_chat", {"model": "m", "messages": "nope"}, 4) is None
    completion = {"model": "m", "prompt": "Once upon a time there was a girl"}
    tokens, salt = hasher.prompt("openai_completions", completion)
    assert tokens == hasher.tokenizer.encode(str(completion["prompt"])) and salt is None
