"""docs/proxy.md's "Several upstreams" config, as written, in front of a real engine server
started the way the page says (``--served-model-name`` with the route's prefix): a request for
``local/...`` goes to ``local`` with its model name unchanged, and the engine answers it."""

from __future__ import annotations

import re
import shlex
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import openai
from servers import ServerThread

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.proxy.app import build_app
from promptcache.proxy.config import load_config_file

DOCS = Path(__file__).resolve().parents[2] / "docs" / "proxy.md"
TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"


def test_the_model_prefix_route_reaches_an_engine_serving_the_prefixed_name(
    tmp_path: Path,
) -> None:
    section = DOCS.read_text(encoding="utf-8").split("\n## Several upstreams\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    toml = section.split("```toml\n", 1)[1].split("```", 1)[0]
    serve = re.search(r"`(promptcache engine serve --model\s+[^`]+)`", section)
    assert serve is not None, "the page does not say how to serve the prefixed name"
    args = shlex.split(serve.group(1))
    name = args[args.index("--served-model-name") + 1]
    assert f'"model": "{name}"' in section
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
    with ServerThread(create_app(engine, served_model_names=[name])) as upstream:
        config_file = tmp_path / "upstreams.toml"
        # the page's file, with the engine on this test's port
        config_file.write_text(toml.replace("http://127.0.0.1:8000", upstream.url))
        db = tmp_path / "log.db"
        config = load_config_file(config_file, db_path=db, flush_interval_s=0.01)
        with ServerThread(build_app(config)) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="x", max_retries=0)
            reply = client.completions.create(model=name, prompt="Once upon a time", max_tokens=2)
            assert reply.model == name and reply.usage is not None
            rows: list[tuple[str, str, int]] = []
            deadline = time.monotonic() + 10
            while not rows and time.monotonic() < deadline:
                time.sleep(0.05)
                with closing(sqlite3.connect(db)) as conn:
                    rows = conn.execute("SELECT upstream, model, status FROM requests").fetchall()
    assert rows == [("local", name, 200)]
