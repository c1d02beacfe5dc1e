"""``client.models.retrieve(...)`` through the proxy (``GET /v1/models/{model}``): forwarded as
``GET /v1/models`` is and logged the same way (no ``api``, no usage), with the model taken from
the path, so a ``model_prefix`` route sends it to the upstream that serves that model.

Upstreams: a real engine server on the tinystories checkpoint serving ``local/tiny`` (a name
with a slash, which the openai client sends as ``%2F``), reached through a ``model_prefix``
route, and the mock upstream answering in OpenAI's wire format as the default ``openai``
upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest
from proxy_support import RunningProxy
from servers import ServerThread
from upstreams import MockUpstream

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.proxy.config import RouteRule, UpstreamConfig

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
SERVED = "local/tiny"


@pytest.fixture(scope="module")
def engine_url() -> Iterator[str]:
    assert TINYSTORIES.is_dir(), f"test checkpoint missing: {TINYSTORIES}"
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=16, seed=0)
    with ServerThread(create_app(engine, served_model_names=[SERVED])) as server:
        yield server.url


@pytest.fixture
def proxy(start_proxy: Callable[..., RunningProxy], engine_url: str) -> RunningProxy:
    local = UpstreamConfig(name="local", url=engine_url, vendor="engine")
    return start_proxy(
        upstreams={"local": local}, rules=(RouteRule("local", model_prefix="local/"),)
    )


def test_retrieve_through_the_proxy_reaches_the_engine_serving_the_model(
    proxy: RunningProxy, engine_url: str, mock_upstream: MockUpstream
) -> None:
    with openai.OpenAI(base_url=f"{engine_url}/v1", api_key="x", max_retries=0) as direct:
        expected = direct.models.retrieve(SERVED)
    with openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0) as client:
        card = client.models.retrieve(SERVED)
    assert card.id == SERVED
    assert card.model_dump() == expected.model_dump()
    assert not mock_upstream.requests  # the default upstream never saw it
    row = proxy.row()
    assert (row["route"], row["api"], row["model"], row["upstream"], row["status"]) == (
        f"/v1/models/{SERVED}",
        None,
        SERVED,
        "local",
        200,
    )
    assert row["uncached_input_tokens"] is None and row["output_tokens"] is None


def test_retrieve_of_a_vendor_model_goes_to_the_default_upstream(
    proxy: RunningProxy, mock_upstream: MockUpstream
) -> None:
    with openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0) as client:
        card = client.models.retrieve("gpt-4o")
        with pytest.raises(openai.NotFoundError) as missing:
            client.models.retrieve("gpt-0")
    assert (card.id, card.object, card.owned_by, card.created) == (
        "gpt-4o",
        "model",
        "system",
        1715367049,
    )
    assert missing.value.code == "model_not_found"  # the upstream's own 404, relayed
    assert [(r.method, r.path) for r in mock_upstream.requests] == [
        ("GET", "/v1/models/gpt-4o"),
        ("GET", "/v1/models/gpt-0"),
    ]
    rows = proxy.rows(2)
    assert [(r["route"], r["api"], r["model"], r["upstream"], r["status"]) for r in rows] == [
        ("/v1/models/gpt-4o", None, "gpt-4o", "openai", 200),
        ("/v1/models/gpt-0", None, "gpt-0", "openai", 404),
    ]


def test_models_path_with_no_model_is_a_404_listing_the_routes(
    proxy: RunningProxy, mock_upstream: MockUpstream
) -> None:
    reply = httpx.get(f"{proxy.url}/v1/models/")
    assert reply.status_code == 404
    message = reply.json()["error"]["message"]
    assert message.startswith("no route GET /v1/models/; the proxy serves ")
    assert "GET /v1/models/{model}" in message
    assert not mock_upstream.requests
    # docs/proxy.md, Errors: this 404 is logged, as a bad Gemini method's is
    [row] = proxy.rows(1)
    assert (row["route"], row["status"], row["error"]) == ("/v1/models/", 404, message)
