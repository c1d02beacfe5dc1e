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
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from port_support import free_ports
from proxy_support import read_rows, wait_until_serving
from servers import ServerThread

from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.fingerprint import fingerprint_request
from promptcache.proxy.app import build_app
from promptcache.proxy.config import ProxyConfig, UpstreamConfig
from promptcache.proxy.routing import RoutingSettings
from promptcache.proxy.routing.chunks import CHUNK_CHARS

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


def _system(text: str) -> dict[str, object]:
    return {"model": "tiny", "messages": [{"role": "system", "content": text}]}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def engines() -> Iterator[list[str]]:
    assert TINYSTORIES.is_dir(), f"test checkpoint missing: {TINYSTORIES}"
    servers, threads, urls = [], [], []
    for port in free_ports(2):  # the first binds in its thread, after the second is picked
        engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
        app = create_app(engine, served_model_names=["tiny"], chat_template=CHAT_TEMPLATE)
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
    # the system message matched: its chunks (the user message differs from its first chunk)
    system_chunks = [
        -(-len(fingerprint_request(_system(SYSTEM[t]), "openai_chat").segments[0].text)
          // CHUNK_CHARS)
        for t in "AB"
    ]  # fmt: skip
    assert [r[2] for r in rows] == [0, system_chunks[0], 0, system_chunks[1]]
    # the engines' own usage: the repeat of a system prompt on its replica read it from cache
    assert usage[0] == usage[2] == 0 and usage[1] > 0 and usage[3] > 0
    assert [r[3] for r in rows] == usage
    assert 'promptcache_replica_healthy{replica="' + engines[1] in health


# A prefix shared inside one message: RAG (a document, then a question) and completions prompts.

DOCUMENTS = {
    "lily": "Lily lived in a small house by the river with her mother and a fat grey cat. "
    "Every morning she walked to the big park, fed the ducks some bread and counted the "
    "boats on the water. One day she found a shiny blue stone under the old oak tree.",
    "tom": "Tom and his dog Max went to the beach on a warm summer day. They built a tall "
    "sand castle with a red flag on top, ran after the waves and ate apples in the shade "
    "of a striped umbrella until the sun went down behind the hill.",
    "sue": "Sue had a garden full of yellow flowers and green beans. She watered it with a "
    "little pink can, pulled the weeds with her grandpa and sang songs to the bees that "
    "buzzed around the tall sunflowers near the white fence.",
}


def _rag(document: str, question: str) -> tuple[str, dict[str, object]]:
    content = f"{document}\nQuestion: {question}"
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 2}
    return "/v1/chat/completions", body


def _completion(document: str, question: str) -> tuple[str, dict[str, object]]:
    return "/v1/completions", {"prompt": f"{document} {question}", "max_tokens": 2}


def _fleet_app(engines: list[str], tmp_path: Path) -> tuple[Any, Path]:
    """A prefix-routing proxy app over the engines (health checks out of the way) and its log."""
    upstream = UpstreamConfig(
        name="fleet", url=engines[0], vendor="openai_compatible", replicas=tuple(engines),
        routing=RoutingSettings(health_interval_s=60.0),
    )  # fmt: skip
    db = tmp_path / "log.db"
    config = ProxyConfig(
        upstreams={"fleet": upstream}, default_upstream="fleet", db_path=db, flush_interval_s=0.05
    )
    return build_app(config), db


def _rows_when_logged(app: Any, db: Path, count: int) -> list[dict[str, Any]]:
    """The log's rows once ``count`` of them are written (at most 10 s)."""
    deadline = time.monotonic() + 10
    while len(rows := read_rows(db)) < count and time.monotonic() < deadline:
        app.state.store.flush()
        time.sleep(0.05)
    return rows


@pytest.mark.parametrize("shape", [_rag, _completion], ids=["rag", "completions"])
def test_a_prefix_shared_inside_one_message_routes_to_its_holder(
    engines: list[str], tmp_path: Path, shape: object
) -> None:
    app, db = _fleet_app(engines, tmp_path)
    build = shape if callable(shape) else None
    assert build is not None
    # each shape its own ending, so the engines' caches from the other shape do not count
    tag = build.__name__
    sent = [
        ("lily", f"{tag}: What did Lily find?"),
        ("tom", f"{tag}: What did they build?"),
        ("lily", f"{tag}: Who lived with Lily?"),  # shares the document, not the question
        ("sue", f"{tag}: What did Sue grow?"),  # a different document
    ]
    cached, texts = [], []
    with ServerThread(app) as proxy:
        for doc, question in sent:
            path, body = build(DOCUMENTS[doc] + f" ({tag})", question)
            api = "openai_chat" if path.endswith("chat/completions") else "openai_completions"
            texts.append(fingerprint_request(body, api).segments[0].text)
            reply = httpx.post(f"{proxy.url}{path}", json={"model": "tiny", "temperature": 0,
                                                            **body}, timeout=60)  # fmt: skip
            assert reply.status_code == 200, reply.text
            details = reply.json()["usage"].get("prompt_tokens_details") or {}
            cached.append(details.get("cached_tokens") or 0)
        rows = _rows_when_logged(app, db, 4)
    assert [(r["replica"], r["route_reason"]) for r in rows] == [
        (engines[0], "new_prefix"),
        (engines[1], "new_prefix"),
        (engines[0], "prefix"),  # the document's holder, though the message differs
        (engines[1], "new_prefix"),  # nothing of it anywhere: the least loaded
    ]
    common = next(i for i, (a, b) in enumerate(zip(texts[0], texts[2], strict=False)) if a != b)
    assert rows[2]["route_depth"] == common // CHUNK_CHARS >= 4 and rows[3]["route_depth"] == 0
    # the engine served the shared document from its cache: at least all but its last block
    assert cached[2] >= 16 * (len(DOCUMENTS["lily"]) // 4 // 16 - 1)
    assert cached[0] == cached[1] == 0 and cached[3] < 16
    assert [r["cache_read_tokens"] for r in rows] == cached


def test_a_salted_prompt_routes_by_its_own_salt(engines: list[str], tmp_path: Path) -> None:
    """Requests with different `cache_salt` values never share KV blocks, so a prompt another
    tenant's salt cached is held nowhere for this one: it is a new prefix (least loaded), with
    no held depth that no replica can serve, and a repeat of a salt goes back to its holder."""
    app, db = _fleet_app(engines, tmp_path)
    prompt = DOCUMENTS["sue"] + " (salted) What did Sue sing?"
    cached = []
    with ServerThread(app) as proxy:
        for salt in ("tenant-a", "tenant-b", "tenant-a"):
            body = {"model": "tiny", "prompt": prompt, "max_tokens": 2, "cache_salt": salt}
            reply = httpx.post(f"{proxy.url}/v1/completions", json=body, timeout=60)
            assert reply.status_code == 200, reply.text
            cached.append(reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
        rows = _rows_when_logged(app, db, 3)
    assert [(r["route_reason"], r["route_depth"]) for r in rows][:2] == [
        ("new_prefix", 0),
        ("new_prefix", 0),
    ]
    assert rows[2]["route_reason"] == "prefix" and rows[2]["route_depth"] > 0
    assert rows[2]["replica"] == rows[0]["replica"] != rows[1]["replica"]
    assert cached[0] == cached[1] == 0 and cached[2] > 0  # the engines' own figures
