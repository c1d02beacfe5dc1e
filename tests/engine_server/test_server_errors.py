"""Bad input gets an OpenAI-shaped 4xx naming the field, never a 500."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_support import LiveServer, Server, load_engine

from promptcache.engine.server import create_app
from promptcache.engine.server.protocol import MAX_MESSAGE_DEPTH
from promptcache.engine.server.unsupported import UNSUPPORTED_FIELDS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "engine-server.md"

CHAT = [{"role": "user", "content": "Hi"}]
OK_COMPLETION: dict[str, Any] = {"model": "tiny", "prompt": "Hi", "max_tokens": 2}
OK_CHAT: dict[str, Any] = {"model": "tiny", "messages": CHAT, "max_tokens": 2}


def _post(server: Server, path: str, body: Any) -> httpx.Response:
    """POST ``body`` as JSON; ASCII escapes, so lone surrogates ("\\ud800") can be sent too."""
    return httpx.post(
        f"{server.v1}{path}",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        timeout=30,
    )


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


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
    ("/completions", {"prompt": [[]]}, "prompt[0]", "invalid_value"),
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
    # Text the tokenizer or the engine would get must be valid Unicode (no lone surrogate).
    ("/completions", {"prompt": "\ud800"}, "prompt", "invalid_value"),
    ("/completions", {"prompt": ["ok", "a\udfffb"]}, "prompt[1]", "invalid_value"),
    ("/chat/completions", {"messages": [{"role": "user", "content": "\ud800"}]},
     "messages[0].content", "invalid_value"),
    ("/chat/completions",
     {"messages": [{"role": "user", "content": [{"type": "text", "text": "\ud800"}]}]},
     "messages[0].content[0].text", "invalid_value"),
    ("/chat/completions", {"messages": [{"role": "user", "content": "x", "name": "\udc00"}]},
     "messages[0].name", "invalid_value"),
    ("/completions", {"stop": "\ud800"}, "stop", "invalid_value"),
    ("/completions", {"cache_salt": "\ud800"}, "cache_salt", "invalid_value"),
    # Deep nesting inside a message (the template would recurse into it).
    ("/chat/completions",
     {"messages": [{"role": "user", "content": "x", "extra": _nested(MAX_MESSAGE_DEPTH + 5)}]},
     "messages[0]", "invalid_value"),
    # Empty stop strings and salts are rejected in every spelling.
    ("/completions", {"stop": ""}, "stop", "invalid_value"),
    ("/chat/completions", {"stop": ["a", ""]}, "stop", "invalid_value"),
    ("/completions", {"cache_salt": ""}, "cache_salt", "invalid_value"),
    # Integer fields: integral numbers only, and every one bounded.
    ("/completions", {"max_tokens": 2.5}, "max_tokens", "invalid_type"),
    ("/completions", {"n": 2.5}, "n", "invalid_type"),
    ("/completions", {"top_k": 3.5}, "top_k", "invalid_type"),
    ("/completions", {"seed": 1.5}, "seed", "invalid_type"),
    ("/completions", {"logprobs": 0.5}, "logprobs", "invalid_type"),
    ("/completions", {"max_tokens": 1e300}, "max_tokens", "invalid_value"),
    ("/completions", {"max_tokens": 10**30}, "max_tokens", "invalid_value"),
    ("/chat/completions", {"max_completion_tokens": 1e300}, "max_completion_tokens",
     "invalid_value"),
    ("/chat/completions", {"max_tokens": 2**63}, "max_tokens", "invalid_value"),
    ("/completions", {"top_k": 2**63}, "top_k", "invalid_value"),
    ("/completions", {"top_k": 10**30}, "top_k", "invalid_value"),
    ("/completions", {"top_k": 2**31}, "top_k", "invalid_value"),
    ("/completions", {"n": 2**63}, "n", "invalid_value"),
    ("/completions", {"best_of": 2**63}, "best_of", "invalid_value"),
    ("/completions", {"logprobs": 2**63}, "logprobs", "invalid_value"),
    ("/chat/completions", {"logprobs": True, "top_logprobs": 2**63}, "top_logprobs",
     "invalid_value"),
    ("/completions", {"stop_token_ids": [2**63]}, "stop_token_ids", "invalid_value"),
    ("/completions", {"stop_token_ids": [99999]}, "stop_token_ids", "invalid_value"),
    ("/completions", {"stop_token_ids": [-1]}, "stop_token_ids", "invalid_value"),
    ("/completions", {"stop_token_ids": [1.5]}, "stop_token_ids", "invalid_type"),
    ("/completions", {"prompt": [2**63]}, "prompt", "invalid_value"),
    ("/completions", {"prompt": [[5, 10**30]]}, "prompt[0]", "invalid_value"),
    # Output-changing features the server does not implement (UNSUPPORTED_FIELDS).
    ("/chat/completions", {"functions": [{"name": "f", "parameters": {}}]}, "functions",
     "unsupported_parameter"),
    ("/chat/completions", {"function_call": {"name": "f"}}, "function_call",
     "unsupported_parameter"),
    ("/chat/completions", {"tool_choice": "required"}, "tool_choice", "unsupported_parameter"),
    ("/chat/completions", {"modalities": ["audio"]}, "modalities", "unsupported_parameter"),
    ("/chat/completions", {"modalities": ["text", "audio"]}, "modalities",
     "unsupported_parameter"),
    ("/completions", {"guided_json": {"type": "object"}}, "guided_json", "unsupported_parameter"),
    ("/chat/completions", {"guided_choice": ["yes", "no"]}, "guided_choice",
     "unsupported_parameter"),
    ("/chat/completions", {"guided_regex": "[a-z]+"}, "guided_regex", "unsupported_parameter"),
    ("/completions", {"min_tokens": 3}, "min_tokens", "unsupported_parameter"),
    ("/chat/completions", {"prompt_logprobs": 1}, "prompt_logprobs", "unsupported_parameter"),
    ("/completions", {"include_stop_str_in_output": True}, "include_stop_str_in_output",
     "unsupported_parameter"),
    ("/completions", {"response_format": {"type": "json_object"}}, "response_format",
     "unsupported_parameter"),
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
        # An ignored field nested 3000 levels deep: the decoder's recursion limit, not a 500.
        b'{"model": "tiny", "prompt": "Hi", "foo": ' + b"[" * 3000 + b"]" * 3000 + b"}",
        b'{"model": "tiny", "prompt": "Hi", "foo": ' + b'{"a":' * 3000 + b"1" + b"}" * 3001,
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
    served = "POST /v1/chat/completions, POST /v1/completions, GET /v1/models"
    # the official Anthropic client pointed at the engine: told what the server does serve
    client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as info:
        client.messages.create(
            model="tiny", max_tokens=2, messages=[{"role": "user", "content": "Hi"}]
        )
    message = info.value.body["error"]["message"]  # type: ignore[index]
    assert message.startswith("Not Found: POST /v1/messages; this server serves ")
    assert served in message
    wrong_method = httpx.get(f"{server.v1}/chat/completions").json()["error"]["message"]
    assert wrong_method.startswith("Method Not Allowed: GET /v1/chat/completions; this server")
    assert served in wrong_method
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
          "top_k", "min_p", "stop_token_ids", "ignore_eos", "model", "cache_salt", "best_of",
          "max_completion_tokens", "min_tokens", "tool_choice", "modalities"]  # fmt: skip


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
    message = response.json()["error"]["message"]
    assert "limit of 33554432 bytes (32 MiB); send a smaller body" in message


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


def test_a_huge_number_is_named_briefly_not_echoed_digit_by_digit(server: Server) -> None:
    for value, shown in ((1e300, "1e+300"), (10**300, "301-digit")):
        body = {**OK_COMPLETION, "max_tokens": value}
        message = _assert_openai_error(_post(server, "/completions", body), 400, "max_tokens")[
            "message"
        ]
        assert shown in message and "2147483647" in message
        assert len(message) < 200, message


@pytest.mark.parametrize(
    ("path", "changes", "param", "message"),
    [
        ("/completions", {"prompt": [1.5]}, "prompt",
         "prompt[0] must be an integer token id, got a number"),
        ("/completions", {"prompt": [5, 1.5]}, "prompt",
         "prompt[1] must be an integer token id, got a number"),
        ("/completions", {"prompt": ["Hi", 7]}, "prompt[1]",
         "prompt[1] must be a string or an array of token ids, got a number"),
        ("/completions", {"prompt": ["Hi", {"text": "x"}]}, "prompt[1]",
         "prompt[1] must be a string or an array of token ids, got an object"),
        ("/completions", {"prompt": [[5], [6, "x"]]}, "prompt[1]",
         "prompt[1][1] must be an integer token id, got a string"),
        ("/completions", {"prompt": [[5, 6], [7, 10**30]]}, "prompt[1]",
         "prompt[1][1] is a 31-digit number, outside the vocabulary"),
        ("/completions", {"prompt": [[5, 6], []]}, "prompt[1]",
         "prompt[1] is empty: send at least one token"),
        ("/chat/completions", {"stop": [1]}, "stop", "stop[0] must be a string, got a number"),
        ("/completions", {"stop": ["a", ["b"]]}, "stop",
         "stop[1] must be a string, got an array"),
        ("/chat/completions", {"messages": [{"content": "Hi"}]}, "messages[0].role",
         "messages[0].role is required: one of system, developer, user, assistant, tool"),
        ("/chat/completions", {"messages": [{"role": {"name": "user"}, "content": "Hi"}]},
         "messages[0].role", "messages[0].role must be one of system, developer, user, "
         "assistant, tool, got an object"),
        ("/chat/completions", {"messages": [{"role": "u" * 5000, "content": "Hi"}]},
         "messages[0].role", "got a 5000-character string"),
        ("/chat/completions", {"messages": [{"role": "user", "content": ["Hi"]}]},
         "messages[0].content[0]", "must be a text part ({'type': 'text', 'text': ...}); got "
         "a string"),
    ],
)  # fmt: skip
def test_a_bad_prompt_element_or_role_is_named_where_it_is(
    server: Server, path: str, changes: dict[str, Any], param: str, message: str
) -> None:
    body = {**(OK_COMPLETION if path == "/completions" else OK_CHAT), **changes}
    error = _assert_openai_error(_post(server, path, body), 400, param)
    assert message in error["message"], error["message"]
    assert "None" not in error["message"] and len(error["message"]) < 200


def test_an_integer_longer_than_python_converts_is_a_400_that_names_no_python_call(
    server: Server,
) -> None:
    """5000 digits is valid JSON, but past Python's int-conversion limit (4300 digits): the
    client is told to send shorter numbers, not to call sys.set_int_max_str_digits."""
    for field in ("max_tokens", "foo"):  # a known field and an ignored one alike
        response = httpx.post(
            f"{server.v1}/completions",
            content=b'{"model": "tiny", "prompt": "Hi", "%s": %s}' % (field.encode(), b"9" * 5000),
            headers={"content-type": "application/json"},
            timeout=30,
        )
        error = _assert_openai_error(response, 400, None)
        assert "4300 digits" in error["message"] and "Send shorter numbers" in error["message"]
        assert "sys." not in error["message"] and len(error["message"]) < 200


def test_integral_numbers_are_integers_in_every_integer_field(server: Server) -> None:
    """2.0 means 2 for every integer field alike (as vLLM's pydantic models read it)."""
    body = {
        "model": "tiny",
        "prompt": [[1.0, 450.0, 92.0]],
        "max_tokens": 3.0,
        "n": 2.0,
        "best_of": 2.0,
        "top_k": 3.0,
        "seed": 7.0,
        "logprobs": 1.0,
        "stop_token_ids": [2.0],
        "ignore_eos": True,
    }
    response = _post(server, "/completions", body)
    assert response.status_code == 200, response.text
    reply = response.json()
    assert len(reply["choices"]) == 2
    assert reply["usage"] == {**reply["usage"], "prompt_tokens": 3, "completion_tokens": 6}
    chat = {**OK_CHAT, "max_completion_tokens": 2.0, "logprobs": True, "top_logprobs": 1.0}
    response = _post(server, "/chat/completions", chat)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] <= 2


def _a_value_that_is_not_a_no_op(allowed: str) -> Any:
    return {"false": True, "0": 5}.get(allowed, {"type": "json_object"})


@pytest.mark.parametrize("entry", UNSUPPORTED_FIELDS, ids=lambda e: e.name)
def test_every_unsupported_field_is_a_400_naming_it(server: Server, entry: Any) -> None:
    for endpoint in entry.endpoints:
        path, ok = (
            ("/chat/completions", OK_CHAT)
            if endpoint == "chat"
            else ("/completions", OK_COMPLETION)
        )
        body = {**ok, entry.name: _a_value_that_is_not_a_no_op(entry.allowed)}
        error = _assert_openai_error(_post(server, path, body), 400, entry.name)
        assert error["code"] == "unsupported_parameter"
        assert (
            error["message"].startswith(f"{entry.name}: ") and "not supported" in error["message"]
        )
        # the feature is named in words, not by the field again ("logit_bias: logit_bias is...")
        assert f"{entry.name}: {entry.name} is not" not in error["message"], error["message"]


def test_no_op_values_of_unsupported_fields_are_accepted(server: Server) -> None:
    shared = {
        "response_format": {"type": "text"},
        "logit_bias": {},
        "min_tokens": 0,
        "include_stop_str_in_output": False,
        "use_beam_search": False,
        "bad_words": [],
        "guided_json": None,
        "stop": [],
        "skip_special_tokens": True,
        "spaces_between_special_tokens": True,
        "return_tokens_as_token_ids": False,
        "logits_processors": [],
    }
    chat = {
        **OK_CHAT,
        **shared,
        "tools": [],
        "tool_choice": "none",
        "functions": [],
        "function_call": "auto",
        "modalities": ["text"],
        "echo": False,
        "continue_final_message": False,
        "chat_template_kwargs": {},
        "documents": [],
        "add_special_tokens": False,
    }
    assert _post(server, "/chat/completions", chat).status_code == 200
    completion = {**OK_COMPLETION, **shared, "add_special_tokens": True}
    assert _post(server, "/completions", completion).status_code == 200


def test_the_docs_list_every_unsupported_field() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("### Unsupported fields", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)`", section, flags=re.MULTILINE))
    documented |= set(re.findall(r"`(guided_\w+|structural_tag|structured_outputs)`", section))
    assert documented == {entry.name for entry in UNSUPPORTED_FIELDS}


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
     "application/xml", "json"],
)  # fmt: skip
def test_a_body_that_is_not_declared_json_is_a_415(server: Server, content_type: str) -> None:
    response = httpx.post(
        f"{server.v1}/completions",
        content=json.dumps(OK_COMPLETION).encode(),
        headers={"content-type": content_type},
    )
    error = _assert_openai_error(response, 415, None)
    assert error["code"] == "unsupported_media_type"
    assert "application/json" in error["message"]


def test_a_compressed_body_is_a_415_asking_for_it_uncompressed(server: Server) -> None:
    body = json.dumps(OK_COMPLETION).encode()
    for encoding, content in (("gzip", gzip.compress(body)), ("br", b"\x1b\x10\x00")):
        response = httpx.post(
            f"{server.v1}/completions",
            content=content,
            headers={"content-type": "application/json", "content-encoding": encoding},
        )
        error = _assert_openai_error(response, 415, None)
        assert error["code"] == "unsupported_media_type"
        assert f"Content-Encoding '{encoding}' is not supported" in error["message"]
        assert "send the JSON body uncompressed" in error["message"]
    # a body that is plain JSON whatever its header says is read as it is
    response = httpx.post(
        f"{server.v1}/completions",
        content=body,
        headers={"content-type": "application/json", "content-encoding": "gzip"},
        timeout=30,
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "content_type",
    [None, "application/json", "application/json; charset=utf-8", "Application/JSON",
     "application/vnd.api+json"],
)  # fmt: skip
def test_json_and_a_missing_content_type_are_accepted(
    server: Server, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = httpx.post(
        f"{server.v1}/chat/completions", content=json.dumps(OK_CHAT).encode(), headers=headers
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("entry", UNSUPPORTED_FIELDS, ids=lambda e: e.name)
def test_an_absent_unsupported_field_is_a_no_op(entry: Any) -> None:
    """``unsupported_field_error`` accepts a body that sends none of the names at once."""
    assert entry.is_noop(None)
