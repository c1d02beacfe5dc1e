"""Failures past validation: a chat template that breaks at render time is a 400, an unexpected
server fault is an OpenAI-shaped 500, and neither drops the keep-alive connection. Also the
completions default ``max_tokens`` on a short context.

One server for the module: ``max_model_len`` 8 and a chat template that misbehaves on purpose
for some message contents (the tinystories checkpoint has no template of its own).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from server_support import LiveServer, load_engine

from promptcache.engine.server import create_app

MODEL = "short"
MAX_MODEL_LEN = 8
# "add-int" adds 5 to a string (TypeError at render time); "reject" calls raise_exception;
# "bad-text" writes a lone surrogate, which no tokenizer can encode: the template is at fault.
TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['content'] == 'add-int' %}{{ m['content'] + 5 }}"
    "{% elif m['content'] == 'reject' %}{{ raise_exception('no rejects please') }}"
    "{% elif m['content'] == 'bad-text' %}{{ '\\ud800' }}"
    "{% else %}{{ m['content'] }}{% endif %}"
    "{% endfor %}"
)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    engine = load_engine(num_blocks=8, block_size=4, max_model_len=MAX_MODEL_LEN)
    app = create_app(engine, served_model_names=[MODEL], chat_template=TEMPLATE)
    with LiveServer(app) as live:
        yield f"{live.url}/v1"


def _chat(content: str) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": 1}


def _local_port(response: httpx.Response) -> int:
    """The client-side port of the connection that carried ``response``."""
    port: int = response.extensions["network_stream"].get_extra_info("client_addr")[1]
    return port


def _assert_connection_kept(http: httpx.Client, url: str, failed: httpx.Response) -> None:
    assert failed.headers.get("connection") != "close"
    ok = http.post(f"{url}/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 1})
    assert ok.status_code == 200, ok.text
    assert _local_port(ok) == _local_port(failed)  # the same keep-alive connection


def test_a_template_error_at_render_time_is_a_400_and_keeps_the_connection(url: str) -> None:
    with httpx.Client(timeout=30) as http:
        response = http.post(f"{url}/chat/completions", json=_chat("add-int"))
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["param"] == "messages"
        assert error["code"] == "invalid_value"
        assert "failed to render these messages" in error["message"]
        assert "TypeError" in error["message"]
        _assert_connection_kept(http, url, response)


def test_raise_exception_in_the_template_is_a_400(url: str) -> None:
    client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="no rejects please") as info:
        client.chat.completions.create(**_chat("reject"))
    assert info.value.param == "messages"  # type: ignore[attr-defined]


def test_an_unexpected_server_fault_is_an_openai_shaped_500(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A template that writes invalid text is the server's bug, not the client's: no handler
    expects the tokenizer to refuse rendered text, so the catch-all answers it."""
    caplog.set_level(logging.ERROR, logger="promptcache.engine.server.app")
    with httpx.Client(timeout=30) as http:
        response = http.post(f"{url}/chat/completions", json=_chat("bad-text"))
        assert response.status_code == 500, response.text
        assert response.headers["content-type"] == "application/json"
        error = response.json()["error"]
        assert error["type"] == "server_error"
        assert error["param"] is None and error["code"] is None
        assert "error id" in error["message"]
        assert "Traceback" not in error["message"] and "TypeError" not in error["message"]
        _assert_connection_kept(http, url, response)
    error_id = error["message"].split("error id ", 1)[1].split(";", 1)[0]
    [record] = [r for r in caplog.records if error_id in r.getMessage()]
    assert record.exc_info is not None  # the traceback is in the server log
    client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError, match="error id"):
        client.chat.completions.create(**_chat("bad-text"))


def test_the_default_max_tokens_shrinks_to_the_room_left(url: str) -> None:
    client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
    # No max_tokens: 16 by default, but only 8 - prompt tokens fit; that is not an error.
    reply = client.completions.create(model=MODEL, prompt="Hi", extra_body={"ignore_eos": True})
    assert reply.usage is not None
    assert reply.usage.prompt_tokens + reply.usage.completion_tokens == MAX_MODEL_LEN
    assert reply.choices[0].finish_reason == "length"
    # A batch: the default fits the shortest prompt; a longer one stops at max_model_len.
    batch = client.completions.create(
        model=MODEL, prompt=["Hi", "Once upon a time"], extra_body={"ignore_eos": True}
    )
    assert [c.finish_reason for c in batch.choices] == ["length", "length"]
    # An explicit max_tokens that does not fit is still the client's error.
    with pytest.raises(openai.BadRequestError, match="Lower max_tokens") as info:
        client.completions.create(model=MODEL, prompt="Hi", max_tokens=16)
    assert info.value.code == "context_length_exceeded"
