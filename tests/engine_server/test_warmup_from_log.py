"""``engine serve --warmup-from-log PROXY_DB --top N``: a real proxy with ``--store-prefixes``
in front of a real engine logs three prefix families; a fresh server then prefills the N
costliest and the first real request of each hits the prefix cache.

The expected families come from costs summed here from the log's rows; token and block counts
from the stored bodies tokenised here (chat template, `prefix_block_hashes`).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from click.testing import CliRunner
from server_support import (
    BLOCK_SIZE,
    CHAT_TEMPLATE,
    LONG_PROMPT,
    MODEL_NAME,
    TINYSTORIES,
    LiveServer,
    load_engine,
)
from test_server_cli import _serve_command, _serving

from promptcache.cli import cli
from promptcache.engine.block_manager import prefix_block_hashes
from promptcache.engine.server import create_app
from promptcache.engine.server.protocol import ServingContext
from promptcache.engine.server.warmup import read_warmup_log
from promptcache.errors import ConfigError
from promptcache.proxy.app import build_app
from promptcache.proxy.config import ProxyConfig, UpstreamConfig

#: Family A: one long system prompt, the same request four times (most of it read from cache).
STORY = [
    {"role": "system", "content": LONG_PROMPT},
    {"role": "user", "content": "Tell me a story about a red ball."},
]
#: Family B: a short system prompt and long questions that differ from the first token.
ANIMALS = "You tell stories about animals."
QUESTIONS = [
    "Why did the small brown rabbit hide under the old wooden bench in the garden all day long "
    "while the other animals played near the pond and the sun went down behind the hills?",
    "Where did the clever grey cat find the shiny blue key that the farmer lost in the barn "
    "last winter when the snow was deep and the cows stayed inside the warm stable?",
    "How did the brave little duck swim across the wide river to bring the lost puppy back "
    "home to the happy family who lived in the yellow house beside the tall green trees?",
]
#: Family C: one completions request, never among the top 2.
TALE = (
    "The little dog ran to the park and saw a big red ball under a tree. He wanted it so much "
    "that he barked and jumped until a kind old man threw it for him, again and again."
)


def _log_traffic(db: Path, *, store_prefixes: bool) -> None:
    """Send the three families through a proxy (priced as gpt-5) in front of a fresh engine."""
    engine = load_engine()
    app = create_app(engine, served_model_names=[MODEL_NAME], chat_template=CHAT_TEMPLATE)
    with LiveServer(app) as upstream:
        config = ProxyConfig(
            upstreams={
                "engine": UpstreamConfig(
                    name="engine", url=upstream.url, vendor="engine", price_as="gpt-5"
                )
            },
            default_upstream="engine",
            db_path=db,
            store_prefixes=store_prefixes,
        )
        with LiveServer(build_app(config)) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test", max_retries=0)
            for _ in range(4):
                client.chat.completions.create(
                    model=MODEL_NAME,
                    messages=STORY,  # type: ignore[arg-type]
                    max_tokens=2,
                    temperature=0,
                )
            for question in QUESTIONS:
                client.chat.completions.create(
                    model=MODEL_NAME,
                    messages=[
                        {"role": "system", "content": ANIMALS},
                        {"role": "user", "content": question},
                    ],
                    max_tokens=2,
                    temperature=0,
                )
            client.completions.create(model=MODEL_NAME, prompt=TALE, max_tokens=2, temperature=0)
    # leaving the blocks stopped the proxy: its lifespan wrote every row and body


def _rows(db: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The logged requests, and the stored bodies by prefix family."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in conn.execute("SELECT * FROM requests ORDER BY started_at")]
        stored = {r["prefix_family"]: dict(r) for r in conn.execute("SELECT * FROM prefix_bodies")}
    finally:
        conn.close()
    return rows, stored


@pytest.fixture(scope="module")
def proxy_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("warmup-log") / "proxy.db"
    _log_traffic(db, store_prefixes=True)
    return db


def _ranked(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Families by cost (USD summed here), and by input tokens, both highest first."""
    cost: dict[str, float] = {}
    tokens: dict[str, int] = {}
    for row in rows:
        family = row["prefix_family"]
        cost[family] = cost.get(family, 0.0) + float(row["cost_usd"])
        tokens[family] = tokens.get(family, 0) + int(row["total_input_tokens"])
    return sorted(cost, key=lambda f: -cost[f]), sorted(tokens, key=lambda f: -tokens[f])


def _prompt_tokens(body: dict[str, Any], tokenizer: Any) -> list[int]:
    if "messages" in body:
        text = tokenizer.apply_chat_template(body["messages"], add_generation_prompt=True)
        return list(tokenizer.encode(text, add_special_tokens=False))
    return list(tokenizer.encode(body["prompt"]))


def test_serve_prefills_the_costliest_families_of_the_log(proxy_log: Path, tmp_path: Path) -> None:
    rows, stored = _rows(proxy_log)
    assert len(rows) == 8 and all(r["status"] == 200 for r in rows)
    by_cost, by_tokens = _ranked(rows)
    assert len(by_cost) == 3 and set(stored) == set(by_cost)
    # the traffic is built so that cost and input tokens rank the families differently
    assert by_cost[:2] != by_tokens[:2]
    top = by_cost[:2]
    template = tmp_path / "chat.jinja"
    template.write_text(CHAT_TEMPLATE)
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", MODEL_NAME, "--chat-template", str(template),
        "--warmup-from-log", str(proxy_log), "--top", "2",
    )  # fmt: skip
    replies = {}
    with _serving(command, f"http://127.0.0.1:{port}") as served:
        for family in by_cost:  # first requests after the start: the stored bodies as sent
            body = json.loads(stored[family]["body"])
            path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            reply = httpx.post(f"http://127.0.0.1:{port}{path}", json=body, timeout=60)
            assert reply.status_code == 200, reply.text
            replies[family] = reply.json()["usage"]
    engine = load_engine(num_blocks=8)
    engine.tokenizer.set_chat_template(CHAT_TEMPLATE)
    prompts = [_prompt_tokens(json.loads(stored[f]["body"]), engine.tokenizer) for f in top]
    blocks = {h for p in prompts for h in prefix_block_hashes(p, BLOCK_SIZE)}
    source = f"the 2 costliest prefix families of {proxy_log} [{top[0][:8]}, {top[1][:8]}]"
    assert f"warming up 2 prompts from {source}; /health answers 503" in served.stderr
    line = next(x for x in served.stderr.splitlines() if "promptcache engine: warmed" in x)
    assert line.startswith(
        f"promptcache engine: warmed 2 prompts from {source} "
        f"({sum(map(len, prompts))} tokens, {len(blocks)} KV blocks cached) in "
    )
    for family in top:
        usage = replies[family]
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        assert cached == (usage["prompt_tokens"] - 1) // BLOCK_SIZE * BLOCK_SIZE > 0
    usage = replies[by_cost[2]]  # not warmed: its first request prefills everything
    assert usage["prompt_tokens"] > BLOCK_SIZE
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0


def _break_two_bodies(log: Path, by_cost: list[str]) -> Path:
    """A copy of ``log`` whose two costliest families have bodies the parser refuses."""
    broken = log.parent / "broken.db"
    source = sqlite3.connect(log)
    conn = sqlite3.connect(broken)
    try:
        source.backup(conn)
        update = "UPDATE prefix_bodies SET body = ? WHERE prefix_family = ?"
        conn.execute(update, ('{"model": "tiny"}', by_cost[0]))
        conn.execute(update, ("[1, 2]", by_cost[1]))
        conn.commit()
    finally:
        conn.close()
        source.close()
    return broken


def test_read_warmup_log_takes_at_most_what_the_log_has(proxy_log: Path) -> None:
    engine = load_engine(num_blocks=8)
    engine.tokenizer.set_chat_template(CHAT_TEMPLATE)
    ctx = ServingContext(
        model_names=(MODEL_NAME,),
        tokenizer=engine.tokenizer,
        max_model_len=engine.effective_max_model_len,
        vocab_size=engine.model_config.vocab_size,
    )
    rows, stored = _rows(proxy_log)
    by_cost, _ = _ranked(rows)
    warmup = read_warmup_log(proxy_log, 10, ctx)
    assert warmup.families == by_cost and warmup.skipped == []
    for family, request in zip(by_cost, warmup.requests, strict=True):
        body = json.loads(stored[family]["body"])
        assert request.prompts == [_prompt_tokens(body, engine.tokenizer)]
    # bodies the parser refuses are passed over, and the next families take their place
    broken = _break_two_bodies(proxy_log, by_cost)
    warmup = read_warmup_log(broken, 2, ctx)
    assert warmup.families == by_cost[2:]
    assert warmup.skipped == [
        (
            by_cost[0],
            f"request {stored[by_cost[0]]['request_id']}: a warm-up request needs 'messages' "
            "(chat) or 'prompt' (completions)",
        ),
        (by_cost[1], f"request {stored[by_cost[1]]['request_id']}: the stored body is not a "
                     "JSON object"),
    ]  # fmt: skip
    other = ServingContext(
        model_names=("other",),
        tokenizer=engine.tokenizer,
        max_model_len=engine.effective_max_model_len,
        vocab_size=engine.model_config.vocab_size,
    )
    with pytest.raises(ConfigError, match=r"stores no chat or completions body of 'other'"):
        read_warmup_log(proxy_log, 1, other)


def _serve_error(*options: str) -> str:
    """Run ``engine serve`` in-process with ``options``; its one-line usage error."""
    command, _ = _serve_command(TINYSTORIES, "--served-model-name", MODEL_NAME, *options)
    result = CliRunner().invoke(cli, command[1:])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("Error:")]
    return line


def test_bad_warmup_logs_are_one_line_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    assert f"cannot read the proxy log {missing}: no such file" in _serve_error(
        "--warmup-from-log", str(missing)
    )
    plain = tmp_path / "plain.db"
    _log_traffic(plain, store_prefixes=False)
    for path in tmp_path.glob("plain.db*"):  # the log, its -wal and -shm: no prompt text
        data = path.read_bytes()
        assert QUESTIONS[0][:40].encode() not in data and TALE[:40].encode() not in data, path
    error = _serve_error("--warmup-from-log", str(plain), "--top", "3")
    assert f"the proxy log {plain} holds no stored request bodies; run the proxy with " in error
    assert "--store-prefixes" in error
    garbage = tmp_path / "garbage.db"
    garbage.write_text("not a database at all, just text " * 200)
    assert f"{garbage} is not a promptcache proxy log" in _serve_error(
        "--warmup-from-log", str(garbage)
    )
    # a log another connection holds locked is locked, not "not a proxy log"
    with closing(sqlite3.connect(plain, isolation_level=None)) as holder:
        assert holder.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
        holder.execute("BEGIN EXCLUSIVE")
        locked = _serve_error("--warmup-from-log", str(plain))
        holder.execute("ROLLBACK")
    assert f"the proxy log {plain} is locked by another connection" in locked, locked
    assert "0 is not in the range x>=1" in _serve_error(
        "--warmup-from-log", str(plain), "--top", "0"
    )
    assert "--top applies to --warmup-from-log PROXY_DB" in _serve_error("--top", "2")


def test_the_banner_names_the_families_passed_over(proxy_log: Path, tmp_path: Path) -> None:
    rows, stored = _rows(proxy_log)
    by_cost, _ = _ranked(rows)
    broken = _break_two_bodies(proxy_log, by_cost)
    template = tmp_path / "chat.jinja"
    template.write_text(CHAT_TEMPLATE)
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", MODEL_NAME, "--chat-template", str(template),
        "--warmup-from-log", str(broken), "--top", "2",
    )  # fmt: skip
    with _serving(command, f"http://127.0.0.1:{port}") as served:
        pass
    first = stored[by_cost[0]]["request_id"]
    assert (
        f"promptcache engine: passed over prefix family {by_cost[0][:8]} of {broken}: request "
        f"{first}: a warm-up request needs 'messages' (chat) or 'prompt' (completions)\n"
    ) in served.stderr
    source = (
        f"the costliest prefix family of {broken} [{by_cost[2][:8]}; 2 costlier families "
        "passed over]"
    )
    assert f"warmed 1 prompt from {source} (" in served.stderr


def test_llm_warms_up_from_a_log_and_a_file(proxy_log: Path, tmp_path: Path) -> None:
    from test_warmup import MESSAGES, OTHER_PROMPTS, _write_warmup

    from promptcache.engine import LLM, SamplingParams

    rows, stored = _rows(proxy_log)
    top = _ranked(rows)[0][:2]
    llm = LLM(
        TINYSTORIES,
        warmup=_write_warmup(tmp_path / "warm.jsonl"),
        warmup_from_log=proxy_log,
        warmup_top=2,
        served_model_name=MODEL_NAME,
        chat_template=CHAT_TEMPLATE,
        dtype="float32",
        block_size=BLOCK_SIZE,
        num_blocks=64,
    )
    tokenizer = llm.tokenizer
    logged = [_prompt_tokens(json.loads(stored[f]["body"]), tokenizer) for f in top]
    story = _prompt_tokens({"messages": MESSAGES}, tokenizer)
    other = [list(tokenizer.encode(p)) for p in OTHER_PROMPTS]
    prompts = [story, *other, *logged]  # the file's three prompts, then the log's two
    report = llm.warmup_report
    assert report is not None
    assert (report.num_requests, report.num_prompts) == (4, 5)
    assert report.num_prompt_tokens == sum(map(len, prompts))
    blocks = {h for p in prompts for h in prefix_block_hashes(p, BLOCK_SIZE)}
    assert report.num_cached_blocks == len(blocks)
    [out] = llm.generate(logged[0], SamplingParams(temperature=0, max_tokens=1))
    assert out.num_cached_tokens == (len(logged[0]) - 1) // BLOCK_SIZE * BLOCK_SIZE > 0
    assert llm.warmup_skipped == []
    with pytest.raises(ConfigError, match="warmup_top must be at least 1"):
        LLM(TINYSTORIES, warmup_from_log=proxy_log, warmup_top=0, num_blocks=8)
    with pytest.raises(ConfigError, match="warmup_top needs warmup_from_log"):
        LLM(TINYSTORIES, warmup_top=2, num_blocks=8)
    with pytest.raises(ConfigError, match=r"stores no .* LLM\(served_model_name=NAME\)\)$"):
        LLM(TINYSTORIES, warmup_from_log=proxy_log, num_blocks=8)  # logged as MODEL_NAME


def test_llm_names_the_families_it_passed_over(proxy_log: Path) -> None:
    from promptcache.engine import LLM

    rows, _ = _rows(proxy_log)
    by_cost, _ = _ranked(rows)
    broken = _break_two_bodies(proxy_log, by_cost)
    llm = LLM(
        TINYSTORIES,
        warmup_from_log=broken,
        warmup_top=1,
        served_model_name=MODEL_NAME,
        chat_template=CHAT_TEMPLATE,
        num_blocks=32,
    )
    assert [family for family, _ in llm.warmup_skipped] == by_cost[:2]
    assert "needs 'messages' (chat) or 'prompt'" in llm.warmup_skipped[0][1]
    assert llm.warmup_skipped[1][1]  # a body that is not a JSON object: its own reason
    assert llm.warmup_report is not None and llm.warmup_report.num_requests == 1
