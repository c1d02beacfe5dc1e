"""A model whose logits overflow (inf / NaN) still gets JSON-valid logprobs: -inf and NaN are
sent as ``MIN_LOGPROB`` (-9999.0, vLLM's convention), streamed or not, instead of a 500 or a
stream cut without ``[DONE]``.

The checkpoint is the tinystories one with one row of its (tied) LM head / embedding set to
+inf, so every logit row holds an infinity and log-softmax yields NaN / -inf.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from safetensors.torch import load_file, save_file
from server_support import TINYSTORIES, LiveServer

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.engine.server.responses import MIN_LOGPROB

MODEL = "overflowing"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model_dir = tmp_path_factory.mktemp("overflow")
    for path in TINYSTORIES.iterdir():
        shutil.copy(path, model_dir / path.name)
    weights = load_file(model_dir / "model.safetensors")
    head = weights["lm_head.weight"].clone()  # stored once, tied to the embedding
    head[-1] = float("inf")  # a token the prompt never uses
    weights["lm_head.weight"] = head
    save_file(weights, model_dir / "model.safetensors", metadata={"format": "pt"})
    engine = LLMEngine.from_pretrained(Path(model_dir), dtype="float32", num_blocks=16, seed=0)
    with LiveServer(create_app(engine, served_model_names=[MODEL])) as live:
        yield f"{live.url}/v1"


BODY = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 3, "logprobs": 2}


def _values(logprobs: dict[str, list[object]]) -> list[float]:
    top = [v for entry in logprobs["top_logprobs"] for v in entry.values()]  # type: ignore[attr-defined]
    return [*logprobs["token_logprobs"], *top]  # type: ignore[list-item]


def test_non_finite_logprobs_are_sent_as_min_logprob(url: str) -> None:
    response = httpx.post(f"{url}/completions", json=BODY, timeout=30)
    assert response.status_code == 200, response.text
    values = _values(response.json()["choices"][0]["logprobs"])
    assert MIN_LOGPROB in values  # the case under test: some logprob was not finite
    assert all(isinstance(v, float) and v >= MIN_LOGPROB for v in values)


def test_a_stream_with_non_finite_logprobs_still_ends_with_done(url: str) -> None:
    with httpx.stream(
        "POST", f"{url}/completions", json={**BODY, "stream": True}, timeout=30
    ) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert response.status_code == 200
    assert lines[-1] == "data: [DONE]"
    values = [
        v
        for line in lines[:-1]
        for choice in json.loads(line.removeprefix("data: "))["choices"]
        if choice.get("logprobs")
        for v in _values(choice["logprobs"])
    ]
    assert MIN_LOGPROB in values
