"""Fixtures for the engine server: a live server on 127.0.0.1 with the tinystories checkpoint,
the official ``openai`` clients pointed at it, and a Python-API reference engine.

- ``server`` (session): ``create_app`` on an ``LLMEngine`` (fp32, 256 KV blocks of 16 tokens)
  under uvicorn in a background thread, on a free port, serving the name ``tiny`` with a small
  chat template (the checkpoint has none).
- ``client`` / ``async_client``: ``openai.OpenAI`` / ``AsyncOpenAI`` for that server.
- ``reference`` (session): a separate ``LLM`` on the same checkpoint, for "the server returns
  what the Python API returns" checks.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette

from promptcache.engine import LLM, LLMEngine
from promptcache.engine.server import create_app

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
MODEL_NAME = "tiny"
NUM_BLOCKS = 256
BLOCK_SIZE = 16
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
#: ~60 tokens: long enough to fill several KV blocks, so a repeat hits the prefix cache.
LONG_PROMPT = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside in the "
    "park with her friends. One day, she found a big red ball under a tree. She picked it up "
    "and ran to show her mom, who smiled and said they could play with it after lunch, and she"
)


class LiveServer:
    """A uvicorn server for ``app`` on ``127.0.0.1:<free port>`` in a background thread."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"engine server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(30)
        self._sock.close()


@dataclass
class Server:
    """The running test server: its base URL and the engine behind it."""

    url: str
    engine: LLMEngine

    @property
    def v1(self) -> str:
        return f"{self.url}/v1"

    def metrics(self) -> dict[str, float]:
        """Every sample of ``/metrics`` as ``{"name{label=value}": value}``."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return out

    def wait_idle(self, timeout_s: float = 15.0) -> dict[str, float]:
        """Wait until no request is in flight and every KV block is free; return the metrics."""
        deadline = time.monotonic() + timeout_s
        while True:
            m = self.metrics()
            idle = (
                m["promptcache_engine_requests_in_flight"] == 0
                and m["promptcache_engine_running_sequences"] == 0
                and m["promptcache_engine_waiting_sequences"] == 0
                and m["promptcache_engine_kv_cache_free_blocks"] == NUM_BLOCKS
            )
            if idle or time.monotonic() > deadline:
                return m
            time.sleep(0.05)


def load_engine(**overrides: Any) -> LLMEngine:
    """The tinystories engine the tests serve (fails, not skips, if the checkpoint is missing)."""
    assert TINYSTORIES.is_dir(), f"test checkpoint missing: {TINYSTORIES}"
    settings: dict[str, Any] = {"dtype": "float32", "num_blocks": NUM_BLOCKS, "seed": 0}
    settings.update(overrides)
    return LLMEngine.from_pretrained(TINYSTORIES, **settings)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    engine = load_engine()
    app = create_app(engine, served_model_names=[MODEL_NAME], chat_template=CHAT_TEMPLATE)
    with LiveServer(app) as live:
        yield Server(live.url, engine)


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.v1, api_key="unused", max_retries=0, timeout=60) as c:
        yield c


@pytest.fixture
def async_client(server: Server) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.v1, api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def reference() -> LLM:
    assert TINYSTORIES.is_dir(), f"test checkpoint missing: {TINYSTORIES}"
    llm = LLM(TINYSTORIES, dtype="float32", num_blocks=NUM_BLOCKS, seed=0)
    llm.tokenizer.chat_templates["default"] = CHAT_TEMPLATE
    return llm
