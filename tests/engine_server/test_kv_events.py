"""KV events: the block manager's prefix cache, published in vLLM's format, replayed exactly."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import msgspec
import openai
import pytest
from click.testing import CliRunner
from kv_subscriber import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    Subscriber,
    held_blocks,
    rebuild_hashes,
)
from server_support import CHAT_TEMPLATE, TINYSTORIES, LiveServer

from promptcache.cli import cli
from promptcache.engine import LLMEngine, SamplingParams, kv_events
from promptcache.engine.kv_events import KVEventPublisher, KVEventRecorder, external_block_hash
from promptcache.errors import ConfigError

BLOCK_SIZE = 4
NUM_BLOCKS = 24  # 96 tokens: the workload below needs several times that, so blocks get evicted

STORY = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside in the "
    "park with her friends. "
)
ENDINGS = [
    "One day, she found a big red ball.",
    "Her dog Max ran after a cat.",
    "It started to rain and they went home.",
    "Tom came with a kite and they flew it.",
    "She saw a bird in a tree and sang to it.",
]


def _publisher(**kwargs: int) -> KVEventPublisher:
    return KVEventPublisher("tcp://127.0.0.1:*", "tcp://127.0.0.1:*", **kwargs)


@pytest.fixture
def publisher() -> Iterator[KVEventPublisher]:
    pub = _publisher()
    yield pub
    pub.close()


def _engine() -> LLMEngine:
    return LLMEngine.from_pretrained(
        TINYSTORIES, dtype="float32", num_blocks=NUM_BLOCKS, block_size=BLOCK_SIZE, max_num_seqs=2
    )


def _run_workload(engine: LLMEngine, recorder: KVEventRecorder, pub: KVEventPublisher) -> int:
    """Shared-prefix and unrelated prompts, two at a time; publish once per step.

    Returns the number of batches published.
    """
    params = SamplingParams(temperature=0, max_tokens=3)
    prompts = [STORY + e for e in ENDINGS] + ENDINGS + [STORY + ENDINGS[0]] * 2
    batches = 0
    for i, prompt in enumerate(prompts):
        engine.add_request(f"r{i}", prompt, params)
        while engine.has_unfinished_requests():
            engine.step()
            events = recorder.take()
            if events:
                pub.publish(events)
                batches += 1
    return batches


def _expected(engine: LLMEngine) -> set[int]:
    return {external_block_hash(h) for h in engine.scheduler.block_manager.cached_block_hashes()}


def test_replayed_events_give_exactly_the_cached_blocks(
    publisher: KVEventPublisher, request: pytest.FixtureRequest
) -> None:
    engine = _engine()
    recorder = engine.enable_kv_events()
    live = Subscriber(publisher.endpoint, str(publisher.replay_endpoint))
    request.addfinalizer(live.close)
    time.sleep(0.3)  # let the subscription reach the PUB socket
    batches = _run_workload(engine, recorder, publisher)
    live.receive(batches)
    events = [e for b in live.batches for e in b.events]
    removed = sum(len(e.block_hashes) for e in events if isinstance(e, BlockRemoved))
    assert removed > 0, "the workload must evict cached blocks"
    assert {e.medium for e in events if not isinstance(e, AllBlocksCleared)} == {"GPU"}
    assert all(e.block_size == BLOCK_SIZE and e.lora_id is None for e in events
               if isinstance(e, BlockStored))  # fmt: skip
    expected = _expected(engine)
    assert expected and held_blocks(live.batches) == expected
    assert live.num_live > 0
    # Every published hash is the engine's hash of the block's tokens, chained from its parent.
    assert rebuild_hashes(live.batches) == sum(
        len(e.block_hashes) for e in events if isinstance(e, BlockStored)
    )

    # A subscriber that arrives afterwards rebuilds the same set from the replay socket alone.
    with Subscriber(publisher.endpoint, str(publisher.replay_endpoint)) as late:
        assert late.catch_up(0) == list(range(batches))
        assert held_blocks(late.batches) == expected

    # A cache reset is one AllBlocksCleared; then nothing is held.
    engine.reset_prefix_cache()
    [cleared] = recorder.take()
    assert isinstance(cleared, kv_events.AllBlocksCleared)
    publisher.publish([cleared])
    live.receive(batches + 1)
    assert held_blocks(live.batches) == set() == _expected(engine)


def test_wire_format_is_vllms_array_layout() -> None:
    recorder = KVEventRecorder(block_size=2)
    root, child, other = 2**100 + 5, 2**64 + 7, 9
    recorder.block_stored(root, None, (1, 2))
    recorder.block_stored(child, root, (3, 4))  # continues the chain: same event
    recorder.block_stored(other, 3, (5, 6))  # another chain: a new event
    recorder.block_removed(root)
    recorder.block_removed(other)  # consecutive removals: one event
    recorder.all_blocks_cleared()
    pub = _publisher()
    try:
        with Subscriber(pub.endpoint, str(pub.replay_endpoint)) as sub:
            pub.publish(recorder.take())
            while pub.num_published < 1:
                time.sleep(0.01)
            assert sub.catch_up(0) == [0]
    finally:
        pub.close()
    # The raw msgpack, decoded without any struct: [ts, [event arrays]], tag first.
    raw = msgspec.msgpack.decode(msgspec.msgpack.encode(sub.batches[0]))
    ts, events = raw
    assert isinstance(ts, float) and abs(ts - time.time()) < 60
    assert events == [
        ["BlockStored", [5, 7], None, [1, 2, 3, 4], 2, None, "GPU"],
        ["BlockStored", [9], 3, [5, 6], 2, None, "GPU"],
        ["BlockRemoved", [5, 9], "GPU"],
        ["AllBlocksCleared"],
    ]
    assert recorder.take() == []


def test_replay_keeps_only_the_last_buffer_steps_batches() -> None:
    pub = _publisher(buffer_steps=2)
    for i in range(5):
        pub.publish([kv_events.AllBlocksCleared()] * (i + 1))
    try:
        with Subscriber(pub.endpoint, str(pub.replay_endpoint)) as sub:
            deadline = time.monotonic() + 10
            while pub.num_published < 5:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            # Older batches are gone: a subscriber this late cannot rebuild the whole cache.
            assert sub.catch_up(0) == [3, 4]
    finally:
        pub.close()


def test_the_server_publishes_each_step(publisher: KVEventPublisher) -> None:
    from promptcache.engine.server import create_app

    engine = _engine()
    app = create_app(
        engine, served_model_names=["tiny"], chat_template=CHAT_TEMPLATE, kv_events=publisher
    )
    with LiveServer(app) as live:
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0)
        for i, ending in enumerate(ENDINGS * 2):
            client.chat.completions.create(
                model="tiny",
                messages=[{"role": "user", "content": STORY + ending}],
                max_tokens=2,
                extra_body={"cache_salt": "tenant-b"} if i % 3 == 0 else {},
            )
        with Subscriber(publisher.endpoint, str(publisher.replay_endpoint)) as sub:
            deadline = time.monotonic() + 20
            while True:  # the last step's batch is queued just after its reply is sent
                sub.catch_up()
                if held_blocks(sub.batches) == _expected(engine) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert held_blocks(sub.batches) == _expected(engine) != set()
            assert any(isinstance(e, BlockRemoved) for b in sub.batches for e in b.events)


def test_an_endpoint_that_cannot_be_bound_is_a_config_error(publisher: KVEventPublisher) -> None:
    with pytest.raises(ConfigError, match="cannot bind the KV events socket"):
        KVEventPublisher(publisher.endpoint)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    result = CliRunner().invoke(
        cli,
        ["engine", "serve", "--model", str(TINYSTORIES), "--port", port,
         "--kv-events-endpoint", "tcp://127.0.0.1:*", "--kv-events-replay-endpoint", "nonsense"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "cannot bind the KV events socket 'nonsense' (--kv-events-replay-endpoint)" in (
        result.output
    )
    assert "Traceback" not in result.output
    alone = CliRunner().invoke(
        cli, ["engine", "serve", "--model", "m", "--kv-events-replay-endpoint", "tcp://x:1"]
    )
    assert alone.exit_code == 2 and "needs --kv-events-endpoint" in alone.output
