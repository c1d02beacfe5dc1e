"""The engine on the ``triton`` backend (Triton interpreter, CPU) generates the same greedy tokens
as on the ``torch`` backend, on the real tinystories checkpoint.

The run covers every kernel path the engine uses: plain prefill, chunked prefill (a small token
budget splits the long prompt), prefill after a prefix-cache hit (the second call reuses the
first call's blocks), and decode with several sequences in the batch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from promptcache.engine import LLM, SamplingParams

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
SHARED_PREFIX = (
    "Lily and Tom went to the park. They saw a big tree with red apples. Tom wanted to climb it, "
    "but Lily said"
)


def _greedy_ids(backend: str) -> list[list[list[int]]]:
    """Output token ids per generate() call, per prompt, on ``backend``."""
    calls = [
        [SHARED_PREFIX, "Once upon a time"],
        [SHARED_PREFIX + " no, it is too high.", "The little dog"],  # a prefix-cache hit
    ]
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    llm = LLM(
        model=TINYSTORIES,
        attention_backend=backend,
        dtype="float32",
        block_size=8,
        max_num_batched_tokens=16,  # the 21-token prompt is prefilled in two chunks
    )
    ids = []
    for call, prompts in enumerate(calls):
        outputs = llm.generate(prompts, params)
        if call == 1:
            assert outputs[0].num_cached_tokens > 0, "the second call should hit the cache"
        ids.append([out.output_token_ids for out in outputs])
    return ids


def test_triton_backend_gives_the_torch_backends_greedy_tokens() -> None:
    assert TINYSTORIES.is_dir(), f"test checkpoint missing: {TINYSTORIES.resolve()}"
    expected, got = _greedy_ids("torch"), _greedy_ids("triton")
    for call, (e_call, g_call) in enumerate(zip(expected, got, strict=True)):
        for prompt, (e, g) in enumerate(zip(e_call, g_call, strict=True)):
            assert g == e, f"call {call}, prompt {prompt}: triton {g} != torch {e}"
            assert len(g) == 10


def _window_checkpoint(out_dir: Path, window: int) -> Path:
    """tinystories' weights and tokenizer as a ``MistralForCausalLM`` with a sliding window."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config = json.loads((TINYSTORIES / "config.json").read_text())
    config.update(architectures=["MistralForCausalLM"], model_type="mistral",
                  sliding_window=window)  # fmt: skip
    (out_dir / "config.json").write_text(json.dumps(config))
    for src in TINYSTORIES.iterdir():
        if src.name != "config.json":
            shutil.copy(src, out_dir / src.name)
    return out_dir


def test_a_sliding_window_model_gives_the_torch_backends_greedy_tokens(tmp_path: Path) -> None:
    """A 12-token window with 4-token blocks: prompts longer than the window, chunked prefill,
    and decode long enough that the block manager frees blocks behind the window."""
    model = _window_checkpoint(tmp_path / "window", 12)
    prompts = [SHARED_PREFIX, "Once upon a time"]
    params = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    got = {}
    for backend in ("torch", "triton"):
        llm = LLM(
            model=model,
            attention_backend=backend,
            dtype="float32",
            block_size=4,
            max_num_batched_tokens=16,
        )
        assert llm.engine.scheduler.block_manager.sliding_window == 12
        got[backend] = [out.output_token_ids for out in llm.generate(prompts, params)]
    assert got["triton"] == got["torch"]
    assert all(len(ids) == 24 for ids in got["triton"])
