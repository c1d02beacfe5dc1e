"""Sliding-window models free the blocks that fall out of the window, and stay exact.

The checkpoint is the real tinystories model re-labelled as a Mistral with a 16-token window
(built in a temporary directory at test time). References come from transformers'
``MistralForCausalLM`` with eager attention, recomputing the whole sequence for every token.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_support import TINYSTORIES, read_prompts
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize
from test_block_manager import BlockManagerMachine

from promptcache.engine import LLMEngine, SamplingParams
from promptcache.engine.block_manager import WINDOW_FREED, BlockManager
from promptcache.engine.sequence import Sequence, SequenceStatus

WINDOW = 16
BS = 4
HELD_BOUND = math.ceil(WINDOW / BS) + 2
NEW_TOKENS = 96  # six windows
GREEDY = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True)


def build_window_checkpoint(out_dir: Path, window: int = WINDOW, max_positions: int = 1024) -> Path:
    """tinystories' weights and tokenizer as a ``MistralForCausalLM`` with ``window``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config = json.loads((TINYSTORIES / "config.json").read_text())
    config.update(
        architectures=["MistralForCausalLM"],
        model_type="mistral",
        sliding_window=window,
        max_position_embeddings=max_positions,
    )
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    for src in TINYSTORIES.iterdir():
        if src.name != "config.json":
            shutil.copy(src, out_dir / src.name)
    return out_dir


@pytest.fixture(scope="module")
def window_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_window_checkpoint(tmp_path_factory.mktemp("mistral-window"))


@pytest.fixture(scope="module")
def four_prompts(window_dir: Path) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt ids, transformers' 96 greedy tokens for each) for four of the test prompts."""
    from promptcache.engine import Tokenizer

    tokenizer = Tokenizer.from_pretrained(window_dir)
    prompts = [tokenizer.encode(p) for p in read_prompts()[:4]]
    return prompts, [hf_greedy_full(window_dir, ids, NEW_TOKENS) for ids in prompts]


def hf_greedy_full(model_dir: Path, prompt: list[int], new_tokens: int) -> list[int]:
    """Greedy tokens from transformers' Mistral (eager), the whole sequence run every step."""
    from transformers import MistralForCausalLM

    model = MistralForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager"
    )
    assert model.config.sliding_window == WINDOW
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = model(torch.tensor([ids]), use_cache=False).logits
            ids.append(int(logits[0, -1].argmax()))
    return ids[len(prompt) :]


def run_watching_blocks(engine: LLMEngine, bound: int) -> tuple[dict[str, list[int]], int]:
    """Step until done; after every step each running sequence holds <= ``bound`` blocks and
    the block manager's invariants hold. Returns (request id -> output ids, most blocks any
    sequence held)."""
    sched = engine.scheduler
    bm = sched.block_manager
    outputs: dict[str, list[int]] = {}
    most = 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs[out.request_id] = list(out.output_token_ids)
        live = sched.running + sched.waiting + sched.swapped
        bm.check_integrity(live)
        for seq in sched.running:
            held = bm.num_held_blocks(seq)
            if not seq.is_prefill:
                assert held <= bound, (held, seq)
            most = max(most, held)
    return outputs, most


def test_greedy_equals_transformers_and_blocks_stay_bounded(
    window_dir: Path, four_prompts: tuple[list[list[int]], list[list[int]]]
) -> None:
    """Four sequences of 96 new tokens (six windows) in a 40-block pool (160 tokens: without
    freeing they need 4 x 31 blocks): transformers' tokens, and <= ceil(16 / 4) + 2 blocks
    held per decoding sequence."""
    engine = LLMEngine.from_pretrained(
        window_dir, dtype="float32", block_size=BS, num_blocks=40, max_num_batched_tokens=32
    )
    assert engine.scheduler.block_manager.sliding_window == WINDOW
    assert engine.runner.fused_decode is None  # the fused kernel has no window: torch path
    prompts, references = four_prompts
    for i, ids in enumerate(prompts):
        engine.add_request(f"r{i}", ids, GREEDY)
    outputs, most = run_watching_blocks(engine, HELD_BOUND)
    assert most <= max(HELD_BOUND, max(math.ceil(len(p) / BS) for p in prompts) + 1)
    assert engine.scheduler.block_manager.num_used_blocks == 0
    for i in range(len(prompts)):
        assert len(outputs[f"r{i}"]) == NEW_TOKENS
        assert outputs[f"r{i}"] == references[i], i


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_preemption_over_freed_blocks_stays_exact(
    window_dir: Path, four_prompts: tuple[list[list[int]], list[list[int]]], mode: str
) -> None:
    """The same four generations in a 14-block pool: sequences are preempted (recompute
    prefills the whole history again in 32-token chunks; swap moves only the held blocks) and
    still give transformers' tokens."""
    extra: dict[str, Any] = {"num_cpu_blocks": 32} if mode == "swap" else {}
    engine = LLMEngine.from_pretrained(
        window_dir,
        dtype="float32",
        block_size=BS,
        num_blocks=14,
        max_num_batched_tokens=32,
        preemption_mode=mode,
        **extra,
    )
    prompts, references = four_prompts
    for i, ids in enumerate(prompts):
        engine.add_request(f"r{i}", ids, GREEDY)
    outputs, _ = run_watching_blocks(engine, HELD_BOUND)
    assert engine.scheduler.num_preemptions > 0, "the pool was meant to be too small"
    assert engine.scheduler.block_manager.num_used_blocks == 0
    for i in range(len(prompts)):
        assert outputs[f"r{i}"] == references[i], (mode, i)


def test_window_freed_blocks_are_not_served_as_a_prefix(window_dir: Path) -> None:
    """A generates 80 tokens in a 16-block pool: its generated blocks are freed to the front
    of the free queue and reused at once, its prompt blocks stay cached. A later prompt made of
    A's whole sequence hits only A's 20 prompt tokens, although blocks of A's last window are
    still cached under its block hashes (their chain's earlier blocks are gone), and its greedy
    tokens equal transformers'."""
    engine = LLMEngine.from_pretrained(
        window_dir, dtype="float32", block_size=BS, num_blocks=16, max_num_batched_tokens=32
    )
    bm = engine.scheduler.block_manager
    base = engine.tokenizer.encode(" ".join(read_prompts()))
    prompt_a = base[:20]
    engine.add_request(
        "a", prompt_a, SamplingParams(temperature=0.0, max_tokens=80, ignore_eos=True)
    )
    out_a, _ = run_watching_blocks(engine, HELD_BOUND)
    sequence_a = prompt_a + out_a["a"]
    probe = Sequence("probe", sequence_a, SamplingParams())
    hashes = bm.block_hashes(probe)
    cached = bm.cached_block_hashes()
    assert all(h in cached for h in hashes[:5])  # the prompt's blocks
    assert hashes[5] not in cached  # the first generated block was reused
    late = [i for i, h in enumerate(hashes) if h in cached and i > 5]
    assert late, "A's last blocks should still be cached"

    params = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)
    engine.add_request("b", sequence_a, params)
    num_cached = {}
    outputs = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            num_cached[out.request_id] = out.num_cached_tokens
            outputs[out.request_id] = list(out.output_token_ids)
        bm.check_integrity(engine.scheduler.running)
    assert num_cached["b"] == 20
    assert outputs["b"] == hf_greedy_full(window_dir, sequence_a, 24)


def test_a_long_cached_prefix_is_taken_from_the_window_only() -> None:
    """A sequence hitting 40 cached tokens with an 8-token window takes only the blocks its
    first new token can see; the others stay cached for whoever needs them."""
    bm = BlockManager(32, BS, sliding_window=8)
    first = Sequence("a", list(range(41)), SamplingParams())
    bm.allocate(first, bm.match_prefix(first), 41)
    first.status = SequenceStatus.RUNNING
    bm.mark_computed(first, 41)
    # positions 34..40 are in the window of position 41: blocks 8..10 held, 0..7 freed
    assert first.block_table[:8] == [WINDOW_FREED] * 8
    assert bm.num_held_blocks(first) == 3
    free_order = bm.free_block_ids()
    prompt_blocks = [b for b in free_order if bm.blocks[b].block_hash is not None]
    assert len(prompt_blocks) == 8 and free_order[-8:] == prompt_blocks  # tail: kept longest
    bm.free(first)
    first.status = SequenceStatus.FINISHED

    second = Sequence("b", [*range(41), 99], SamplingParams())
    match = bm.match_prefix(second)
    assert match.num_cached_tokens == 40
    used = bm.num_used_blocks
    bm.allocate(second, match, 2)
    second.status = SequenceStatus.RUNNING
    # the first new position is 40: it sees 33..40, blocks 8..10
    assert second.block_table[:8] == [WINDOW_FREED] * 8
    assert bm.num_held_blocks(second) == 3 and bm.num_used_blocks - used == 3
    bm.check_integrity([second])


def test_swap_and_fork_keep_freed_entries() -> None:
    bm = BlockManager(24, BS, num_cpu_blocks=8, sliding_window=6)
    seq = Sequence("a", list(range(30)), SamplingParams())
    bm.allocate(seq, bm.match_prefix(seq), 30)
    seq.status = SequenceStatus.RUNNING
    bm.mark_computed(seq, 30)
    held = bm.num_held_blocks(seq)
    assert held == 2 and seq.block_table[:6] == [WINDOW_FREED] * 6
    child = bm.fork(seq, 1)
    bm.check_integrity([seq, child])
    bm.free(child)
    bm.swap_out(seq)
    seq.status = SequenceStatus.SWAPPED
    assert bm.num_free_cpu_blocks == 8 - held
    bm.check_integrity([seq])
    bm.swap_in(seq)
    seq.status = SequenceStatus.RUNNING
    assert seq.block_table[:6] == [WINDOW_FREED] * 6 and bm.num_held_blocks(seq) == held
    bm.check_integrity([seq])


def test_the_banner_says_what_the_window_does(window_dir: Path, tiny_checkpoint: Any) -> None:
    """``engine serve``'s sentence: blocks freed with a window on every layer; nothing freed
    when some layer attends to everything; a window longer than max_model_len never reached."""
    from promptcache.commands.engine import _sliding_window_text

    engine = LLMEngine.from_pretrained(window_dir, dtype="float32", block_size=BS, num_blocks=64)
    assert _sliding_window_text(engine) == (
        "16-token sliding window on every layer, masked by the torch attention path; blocks "
        "that fall out of it are freed as sequences grow"
    )
    short = LLMEngine.from_pretrained(
        window_dir, dtype="float32", block_size=BS, num_blocks=64, max_model_len=16
    )
    assert _sliding_window_text(short) == (
        "the model's 16-token sliding window is never reached (max_model_len 16)"
    )
    mixed_dir = tiny_checkpoint(
        "qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=1
    )
    mixed = LLMEngine.from_pretrained(mixed_dir, dtype="float32", block_size=BS, num_blocks=64)
    windows = mixed.model_config.sliding_windows
    assert sorted(windows, key=str) == [8, None]
    assert mixed.scheduler.block_manager.sliding_window is None
    assert _sliding_window_text(mixed) == (
        "sliding windows on 1 of 2 layers, masked by the torch attention path; no block is "
        "freed early (the other layers attend to the whole context)"
    )


class WindowBlockManagerMachine(BlockManagerMachine):
    """test_block_manager's random admit / compute / decode / fork / finish / swap runs, with a
    sliding window that frees blocks: the invariants (refcounts, free queue, hash table, CPU
    pool, no freed block inside a running sequence's window) hold after every step."""

    @initialize(
        num_blocks=st.integers(2, 12), num_cpu_blocks=st.integers(0, 6), window=st.integers(1, 9)
    )
    def setup(self, num_blocks: int, num_cpu_blocks: int, window: int) -> None:
        self.bm = BlockManager(num_blocks, BS, num_cpu_blocks=num_cpu_blocks, sliding_window=window)
        self.live: list[Sequence] = []


WindowBlockManagerMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, derandomize=True
)
test_window_block_manager_state_machine = WindowBlockManagerMachine.TestCase
