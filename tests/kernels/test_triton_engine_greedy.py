"""The engine on the ``triton`` backend (Triton interpreter, CPU) generates the same greedy tokens
as on the ``torch`` backend, on the real tinystories checkpoint.

The run covers every kernel path the engine uses: plain prefill, chunked prefill (a small token
budget splits the long prompt), prefill after a prefix-cache hit (the second call reuses the
first call's blocks), and decode with several sequences in the batch.
"""

from __future__ import annotations

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
