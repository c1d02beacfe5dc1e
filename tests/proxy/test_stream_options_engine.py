"""The proxy's include_usage injection in front of a real engine server, with the official
``openai`` client: a client's own mistake in ``stream_options`` reaches the engine as sent."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from proxy_support import mock_config
from servers import ServerThread

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.proxy.app import build_app

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
TEMPLATE = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"


def test_include_usage_that_is_not_a_boolean_gets_the_engines_400_through_the_proxy(
    tmp_path: Path,
) -> None:
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
    app = create_app(engine, served_model_names=["tiny"], chat_template=TEMPLATE)
    with (
        ServerThread(app) as upstream,
        ServerThread(
            build_app(mock_config(upstream.url, tmp_path / "log.db", flush_interval_s=0.01))
        ) as proxy,
    ):
        messages = [{"role": "user", "content": "Once upon a time"}]
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0)
        for value in ("yes", 1):
            # the engine refuses it; the proxy must not overwrite it with true and serve it
            with pytest.raises(openai.BadRequestError) as info:
                list(
                    client.chat.completions.create(
                        model="tiny",
                        messages=messages,  # type: ignore[arg-type]
                        max_tokens=2,
                        stream=True,
                        stream_options={"include_usage": value},  # type: ignore[typeddict-item]
                    )
                )
            assert "stream_options.include_usage must be a boolean" in str(info.value)
        # a stream that did not ask for usage still has it asked for, and the chunk hidden
        chunks = list(
            client.chat.completions.create(
                model="tiny",
                messages=messages,  # type: ignore[arg-type]
                max_tokens=2,
                stream=True,
                stream_options={"include_usage": False},
            )
        )
        assert chunks and all(chunk.choices and chunk.usage is None for chunk in chunks)
