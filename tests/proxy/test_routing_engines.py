"""Two real engine replicas (tinystories) behind `promptcache proxy --upstream URL1,URL2`.

The engines run in this process under uvicorn on 127.0.0.1 (small KV pools); the proxy is the
CLI in a subprocess. A tenant's follow-up request lands on the replica that served its system
prompt and the engine itself reports the prefix as cached; a new tenant goes to the other one.
"""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import uvicorn
from proxy_support import wait_until_serving

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
SYSTEM = {
    "A": "Once upon a time, there was a little girl named Lily. She liked to play outside "
    "in the park with her friends and her dog, who was very fast.",
    "B": "Tom had a big red truck. Every day he drove it around the garden and made loud "
    "noises, and his sister laughed and clapped her hands.",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def engines() -> Iterator[list[str]]:
    assert TINYSTORIES.is_dir(), f"test checkpoint missing: {TINYSTORIES}"
    servers, threads, urls = [], [], []
    for _ in range(2):
        engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
        app = create_app(engine, served_model_names=["tiny"], chat_template=CHAT_TEMPLATE)
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append(server)
        threads.append(thread)
        urls.append(f"http://127.0.0.1:{port}")
    for server in servers:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline, "engine did not start"
            time.sleep(0.01)
    yield urls
    for server in servers:
        server.should_exit = True
    for thread in threads:
        thread.join(30)


def test_a_tenant_sticks_to_the_replica_that_cached_its_prompt(
    engines: list[str], tmp_path: Path
) -> None:
    port, db = _free_port(), tmp_path / "fleet.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from promptcache.cli import main; main()", "proxy",
         "--upstream", ",".join(engines), "--port", str(port), "--db", str(db)],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, url + "/healthz")
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
        usage = []
        for tenant, question in (("A", "Who is Lily?"), ("A", "What did she find?"),
                                 ("B", "What did Tom drive?"), ("B", "Who laughed?")):  # fmt: skip
            reply = client.chat.completions.create(
                model="tiny",
                messages=[
                    {"role": "system", "content": SYSTEM[tenant]},
                    {"role": "user", "content": question},
                ],
                max_tokens=4,
                temperature=0,
            )
            assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
            usage.append(reply.usage.prompt_tokens_details.cached_tokens or 0)
        health = httpx.get(f"{url}/metrics").text
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert f"-> 2 replicas ({engines[0]}, {engines[1]}), policy prefix" in stderr
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT replica, route_reason, route_depth, cache_read_tokens FROM requests"
            " ORDER BY started_at"
        ).fetchall()
    assert [(r[0], r[1]) for r in rows] == [
        (engines[0], "new_prefix"), (engines[0], "prefix"),
        (engines[1], "new_prefix"), (engines[1], "prefix"),
    ]  # fmt: skip
    assert [r[2] for r in rows] == [0, 1, 0, 1]  # the system message matched
    # the engines' own usage: the repeat of a system prompt on its replica read it from cache
    assert usage[0] == usage[2] == 0 and usage[1] > 0 and usage[3] > 0
    assert [r[3] for r in rows] == usage
    assert 'promptcache_replica_healthy{replica="' + engines[1] in health
