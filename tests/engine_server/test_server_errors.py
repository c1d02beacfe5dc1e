"""Bad input gets an OpenAI-shaped 4xx naming the field, never a 500."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_support import LiveServer, Server, load_engine

from promptcache.engine.server import create_app

CHAT = [{"role": "user", "content": "Hi"}]
OK_COMPLETION: dict[str, Any] = {"model": "tiny", "prompt": "Hi", "max_tokens": 2}
OK_CHAT: dict[str, Any] = {"model": "tiny", "messages": CHAT, "max_tokens": 2}


def _post(server: Server, path: str, body: Any = None, content: bytes | None = None) -> Any:
    response = httpx.post(f"{server.v1}{path}", json=body, content=content, timeout=30)
    return response


def _assert_openai_error(response: httpx.Response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["message"]
    return error


# (path, body overrides, param, code)
BAD_REQUESTS = [
    ("/completions", {"prompt": list(range(1, 600))}, "prompt", "context_length_exceeded"),
    ("/completions", {"prompt": "Hi", "max_tokens": 510}, "max_tokens", "context_length_exceeded"),
    ("/chat/completions", {"messages": [{"role": "user", "content": "a " * 600}]}, "messages",
     "context_length_exceeded"),
    ("/completions", {"max_tokens": 0}, "max_tokens", "invalid_value"),
    ("/chat/completions", {"max_completion_tokens": -3}, "max_completion_tokens", "invalid_value"),
    ("/completions", {"model": "gpt-4o"}, "model", "model_not_found"),
    ("/chat/completions", {"model": "gpt-4o"}, "model", "model_not_found"),
    ("/completions", {"temperature": -0.5}, "temperature", "invalid_value"),
    ("/completions", {"top_p": 0}, "top_p", "invalid_value"),
    ("/completions", {"top_p": 1.5}, "top_p", "invalid_value"),
    ("/chat/completions", {"presence_penalty": 3}, "presence_penalty", "invalid_value"),
    ("/chat/completions", {"frequency_penalty": -2.5}, "frequency_penalty", "invalid_value"),
    ("/completions", {"n": 0}, "n", "invalid_value"),
    ("/completions", {"logprobs": 50}, "logprobs", "invalid_value"),
    ("/chat/completions", {"top_logprobs": 3}, "top_logprobs", "invalid_value"),
    ("/completions", {"seed": -1}, "seed", "invalid_value"),
    ("/completions", {"seed": 2**70}, "seed", "invalid_value"),
    ("/completions", {"n": 129}, "n", "invalid_value"),
    ("/completions", {"n": 100}, "n", "invalid_value"),  # above max_num_seqs (64)
    ("/completions", {"top_k": -2}, "top_k", "invalid_value"),
    ("/completions", {"stop": [""]}, "stop", "invalid_value"),
    ("/completions", {"temperature": "hot"}, "temperature", "invalid_type"),
    ("/completions", {"max_tokens": "10"}, "max_tokens", "invalid_type"),
    ("/completions", {"stream": "yes"}, "stream", "invalid_type"),
    ("/completions", {"prompt": 5}, "prompt", "invalid_type"),
    ("/completions", {"prompt": [1, "a"]}, "prompt", "invalid_type"),
    ("/completions", {"prompt": [99999]}, "prompt", "invalid_value"),
    ("/completions", {"prompt": []}, "prompt", "invalid_value"),
    ("/completions", {"prompt": [[]]}, "prompt", "invalid_value"),
    ("/completions", {"stop": 7}, "stop", "invalid_type"),
    ("/completions", {"model": None}, "model", "missing_required_parameter"),
    ("/completions", {"stream_options": {"include_usage": True}}, "stream_options",
     "invalid_value"),
    ("/chat/completions", {"messages": "Hi"}, "messages", "invalid_type"),
    ("/chat/completions", {"messages": []}, "messages", "invalid_value"),
    ("/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role",
     "invalid_value"),
    ("/chat/completions", {"messages": [{"role": "user", "content": 3}]}, "messages[0].content",
     "invalid_type"),
    ("/chat/completions",
     {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "messages[0].content[0]", "invalid_value"),
    ("/chat/completions", {"logit_bias": {"5": 10}}, "logit_bias", "unsupported_parameter"),
    ("/chat/completions", {"tools": [{"type": "function"}]}, "tools", "unsupported_parameter"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "changes", "param", "code"), BAD_REQUESTS)
def test_bad_field_is_a_400_naming_it(
    server: Server, path: str, changes: dict[str, Any], param: str, code: str
) -> None:
    body = {**(OK_CHAT if path == "/chat/completions" else OK_COMPLETION), **changes}
    body = {k: v for k, v in body.items() if v is not None}
    error = _assert_openai_error(_post(server, path, body), 400, param)
    assert error["code"] == code


def test_openai_client_raises_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny", messages=CHAT, max_tokens=0)  # type: ignore[arg-type]
    assert info.value.status_code == 400
    assert info.value.param == "max_tokens"  # type: ignore[attr-defined]
    with pytest.raises(openai.BadRequestError, match="does not exist"):
        client.completions.create(model="nope", prompt="Hi")
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.completions.create(model="tiny", prompt="word " * 700, stream=True)


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b'{"model": "tiny",',
        b"\xff\xfe",
        b"[1, 2]",
        b'"text"',
        b'{"model": "tiny", "prompt": "Hi", "temperature": NaN}',
        b'{"model": "tiny", "prompt": "Hi", "max_tokens": Infinity}',
    ],
)
def test_malformed_json_or_non_object_body_is_a_400(server: Server, content: bytes) -> None:
    response = httpx.post(
        f"{server.v1}/completions",
        content=content,
        headers={"content-type": "application/json"},
    )
    error = _assert_openai_error(response, 400, None)
    assert error["code"] in ("invalid_json", "invalid_type", "invalid_value")


def test_unknown_path_and_method_are_openai_shaped(server: Server) -> None:
    _assert_openai_error(httpx.post(f"{server.v1}/embeddings", json={}), 404, None)
    _assert_openai_error(httpx.get(f"{server.v1}/completions"), 405, None)
    missing = httpx.get(f"{server.v1}/models/gpt-4o")
    assert _assert_openai_error(missing, 404, "model")["code"] == "model_not_found"


def test_a_model_without_chat_template_answers_400_on_chat() -> None:
    engine = load_engine(num_blocks=32)
    with LiveServer(create_app(engine, served_model_names=["bare"])) as live:
        response = httpx.post(
            f"{live.url}/v1/chat/completions",
            json={"model": "bare", "messages": CHAT, "max_tokens": 2},
        )
        assert "no chat template" in _assert_openai_error(response, 400, "messages")["message"]
        ok = httpx.post(
            f"{live.url}/v1/completions", json={"model": "bare", "prompt": "Hi", "max_tokens": 2}
        )
        assert ok.status_code == 200


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 600)
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=5,
)
FIELDS = ["prompt", "messages", "max_tokens", "temperature", "top_p", "n", "stop", "stream",
          "stream_options", "logprobs", "top_logprobs", "seed", "presence_penalty", "echo",
          "top_k", "min_p", "stop_token_ids", "ignore_eos", "model"]  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(["/completions", "/chat/completions"]),
    changes=st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=3),
)
def test_random_field_values_never_cause_a_500(
    server: Server, path: str, changes: dict[str, Any]
) -> None:
    body = {**(OK_CHAT if path == "/chat/completions" else OK_COMPLETION), **changes}
    if isinstance(body.get("max_tokens"), int) and not isinstance(body["max_tokens"], bool):
        body["max_tokens"] = min(body["max_tokens"], 4)  # keep valid requests quick
    response = httpx.post(f"{server.v1}{path}", json=body, timeout=60)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_oversized_body_is_a_413_even_without_content_length(server: Server) -> None:
    def chunks() -> Any:
        for _ in range(33):
            yield b" " * 2**20  # 33 MiB of whitespace, streamed (chunked transfer encoding)

    response = httpx.post(f"{server.v1}/completions", content=chunks(), timeout=60)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_a_pool_smaller_than_max_model_len_caps_prompts_and_default_max_tokens() -> None:
    engine = load_engine(num_blocks=8)  # 128 tokens of KV, max_model_len 512
    with LiveServer(
        create_app(engine, served_model_names=["small"], chat_template="{{ 'x' }}")
    ) as live:
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0)
        assert client.models.retrieve("small").max_model_len == 128  # type: ignore[attr-defined]
        with pytest.raises(openai.BadRequestError, match="maximum context length is 128"):
            client.completions.create(model="small", prompt="word " * 200, max_tokens=1)
        reply = client.chat.completions.create(
            model="small",
            messages=[{"role": "user", "content": "Hi"}],
            extra_body={"ignore_eos": True},
        )
        assert reply.usage is not None
        assert reply.usage.prompt_tokens + reply.usage.completion_tokens == 128
        assert reply.choices[0].finish_reason == "length"
