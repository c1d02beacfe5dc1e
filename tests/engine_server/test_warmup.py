"""Warm-up of fixed prompts: ``create_app(..., warmup=...)`` and ``engine serve --warmup FILE``.

Block and token counts are computed here from the prompt's own token ids (the tokenizer and
`prefix_block_hashes`), independently of what the server reports.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

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
from promptcache.commands.engine import _warmup_banner
from promptcache.engine import LLM
from promptcache.engine.block_manager import prefix_block_hashes
from promptcache.engine.server import create_app
from promptcache.engine.server.protocol import ServingContext
from promptcache.engine.server.warmup import WarmupReport, read_warmup_file, run_warmup
from promptcache.errors import ConfigError

MESSAGES = [
    {"role": "system", "content": LONG_PROMPT},
    {"role": "user", "content": "Tell me a story about a red ball."},
]
OTHER_PROMPTS = [
    "The little dog ran to the park and saw a big red ball under a tree. He wanted it.",
    "One day, a girl named Mia found a shiny key in the garden and ran to show her mom.",
]


def _write_warmup(path: Path) -> Path:
    lines = [
        json.dumps({"messages": MESSAGES}),  # no model: the first served name
        "",
        json.dumps({"model": MODEL_NAME, "prompt": OTHER_PROMPTS, "max_tokens": 3}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _expected(engine_tokenizer: object) -> tuple[int, int, int]:
    """(prompts, prompt tokens, distinct full blocks) of the warm-up file, counted here."""
    tok = engine_tokenizer
    chat_text = tok.apply_chat_template(MESSAGES, add_generation_prompt=True)  # type: ignore[attr-defined]
    prompts = [tok.encode(chat_text, add_special_tokens=False)]  # type: ignore[attr-defined]
    prompts += [tok.encode(p) for p in OTHER_PROMPTS]  # type: ignore[attr-defined]
    blocks = {h for p in prompts for h in prefix_block_hashes(p, BLOCK_SIZE)}
    return len(prompts), sum(len(p) for p in prompts), len(blocks)


def test_health_waits_for_the_warmup_and_its_prompts_are_cached(tmp_path: Path) -> None:
    engine = load_engine()
    engine.tokenizer.set_chat_template(CHAT_TEMPLATE)
    ctx = ServingContext(
        model_names=(MODEL_NAME,),
        tokenizer=engine.tokenizer,
        max_model_len=engine.effective_max_model_len,
        vocab_size=engine.model_config.vocab_size,
    )
    warmup = read_warmup_file(_write_warmup(tmp_path / "warm.jsonl"), ctx)
    assert [r.line for r in warmup] == [1, 3]
    release = threading.Event()
    reports: list[WarmupReport | BaseException] = []

    def done(result: WarmupReport | BaseException) -> None:
        reports.append(result)
        release.wait(30)  # hold the engine thread: /health must still say "warming up"

    app = create_app(
        engine,
        served_model_names=[MODEL_NAME],
        chat_template=CHAT_TEMPLATE,
        warmup=warmup,
        on_warmup_done=done,
    )
    with LiveServer(app) as live:
        health = httpx.get(f"{live.url}/health", timeout=10)
        assert health.status_code == 503  # the warm-up is done, its report not yet handed on
        num_prompts = sum(len(r.prompts) for r in warmup)
        assert health.json() == {
            "status": "warming up",
            "prompts_prefilled": num_prompts,
            "prompts": num_prompts,
        }
        release.set()
        for _ in range(200):
            health = httpx.get(f"{live.url}/health", timeout=10)
            if health.status_code == 200:
                break
        assert health.json() == {"status": "ok"}
        [report] = reports
        assert isinstance(report, WarmupReport)
        num_prompts, num_tokens, num_blocks = _expected(engine.tokenizer)
        assert (report.num_requests, report.num_prompts) == (2, num_prompts)
        assert report.num_prompt_tokens == num_tokens
        assert report.num_cached_blocks == num_blocks
        with openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as client:
            reply = client.chat.completions.create(
                model=MODEL_NAME,
                messages=MESSAGES,
                max_tokens=2,  # type: ignore[arg-type]
            )
        assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
        expected = (reply.usage.prompt_tokens - 1) // BLOCK_SIZE * BLOCK_SIZE
        assert reply.usage.prompt_tokens_details.cached_tokens == expected > 0


def test_serve_warmup_banner_says_what_was_warmed(tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text(CHAT_TEMPLATE)
    warm = _write_warmup(tmp_path / "warm.jsonl")
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", MODEL_NAME, "--chat-template", str(template),
        "--warmup", str(warm),
    )  # fmt: skip
    with _serving(command, f"http://127.0.0.1:{port}") as served:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
        reply = client.completions.create(
            model=MODEL_NAME, prompt=OTHER_PROMPTS[1], max_tokens=2, temperature=0
        )
    engine = load_engine(num_blocks=8)
    engine.tokenizer.set_chat_template(CHAT_TEMPLATE)
    num_prompts, num_tokens, num_blocks = _expected(engine.tokenizer)
    assert f"warming up {num_prompts} prompts from {warm}; /health answers 503" in served.stderr
    line = next(x for x in served.stderr.splitlines() if "promptcache engine: warmed" in x)
    assert line.startswith(
        f"promptcache engine: warmed {num_prompts} prompts from {warm} "
        f"({num_tokens} tokens, {num_blocks} KV blocks cached) in "
    )
    assert line.endswith(" s")
    assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
    tokens = engine.tokenizer.encode(OTHER_PROMPTS[1])
    assert reply.usage.prompt_tokens_details.cached_tokens == (len(tokens) - 1) // 16 * 16


def test_a_bad_warmup_line_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "hello"}) + "\n" + json.dumps({"temperature": 0}) + "\n")
    command, _ = _serve_command(TINYSTORIES, "--warmup", str(bad))
    result = CliRunner().invoke(cli, command[1:])
    assert result.exit_code == 2, result.output
    assert f"{bad}:2: a warm-up request needs 'messages' (chat) or 'prompt'" in result.output
    assert "Traceback" not in result.output
    missing = tmp_path / "missing.jsonl"
    command, _ = _serve_command(TINYSTORIES, "--warmup", str(missing))
    result = CliRunner().invoke(cli, command[1:])
    assert result.exit_code == 2 and "cannot read the warm-up file" in result.output


def test_a_warmup_without_prefix_caching_is_refused(tmp_path: Path) -> None:
    """A warm-up only fills the prefix cache, so without one it is refused up front, from the
    CLI (before the port is bound or the model loads) and from Python."""
    warm = tmp_path / "warm.jsonl"
    warm.write_text(json.dumps({"prompt": OTHER_PROMPTS[0]}) + "\n")
    with socket.socket() as busy:  # were the refusal late, the port in use would answer first
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        for option in (["--warmup", str(warm)], ["--warmup-from-log", str(tmp_path / "p.db")]):
            command, _ = _serve_command(
                TINYSTORIES, *option, "--no-enable-prefix-caching", "--port", port
            )
            result = CliRunner().invoke(cli, command[1:])
            assert result.exit_code == 2, result.output
            assert (
                f"{option[0]} prefills prompts into the prefix cache; it needs prefix caching "
                "(leave out --no-enable-prefix-caching)"
            ) in result.output
            assert "Traceback" not in result.output
    with pytest.raises(ConfigError, match="needs enable_prefix_caching=True"):
        LLM(TINYSTORIES, warmup=warm, enable_prefix_caching=False, num_blocks=8)


def test_the_banner_says_when_the_cache_could_not_keep_every_warmed_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A warm-up larger than the KV cache keeps only what fits; the banner gives both counts."""
    engine = load_engine(num_blocks=6)
    ctx = ServingContext(
        model_names=(MODEL_NAME,),
        tokenizer=engine.tokenizer,
        max_model_len=engine.effective_max_model_len,
        vocab_size=engine.model_config.vocab_size,
    )
    prompts = [f"Story {i}. {LONG_PROMPT}" for i in range(3)]  # distinct from the first block
    warm = tmp_path / "warm.jsonl"
    warm.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    report = run_warmup(engine, read_warmup_file(warm, ctx))
    blocks = {h for p in prompts for h in prefix_block_hashes(engine.tokenizer.encode(p), 16)}
    assert report.num_blocks == len(blocks) > 6  # more full blocks than the whole pool
    assert 0 < report.num_cached_blocks <= 6
    _warmup_banner(str(warm))(report)
    assert (
        f"({report.num_prompt_tokens} tokens, {report.num_cached_blocks} of {len(blocks)} KV "
        "blocks cached; the others did not fit in the KV cache (--kv-cache-bytes, --kv-ram, "
        "--kv-disk)) in "
    ) in capsys.readouterr().err


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_a_warmup_file_saved_with_a_byte_order_mark_reads_its_first_line(
    tmp_path: Path, bom: bytes
) -> None:
    # a UTF-8 BOM (Windows editors) made line 1 "not JSON (Unexpected UTF-8 BOM ...)", though
    # the server takes a request body that starts with one; line 2 is bad on purpose, so the
    # error says line 1 was read
    warm = tmp_path / "warm.jsonl"
    lines = json.dumps({"prompt": "Once upon a time"}) + "\n" + json.dumps({"n": 1}) + "\n"
    warm.write_bytes(bom + lines.encode())
    command, _ = _serve_command(TINYSTORIES, "--warmup", str(warm))
    result = CliRunner().invoke(cli, command[1:])
    assert result.exit_code == 2, result.output
    assert f"{warm}:2: a warm-up request needs 'messages' (chat) or 'prompt'" in result.output


def test_a_warmup_asked_to_stop_aborts_its_prompts_and_frees_their_blocks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The server's shutdown flag is asked between engine steps: the warm-up of 40 prompts
    stops after 3 steps, its running prompts aborted, every pool block free again, and the
    banner says so. Without the flag the same warm-up runs to the end."""
    from promptcache.engine.server.warmup import WarmupRequest

    engine = load_engine(max_num_batched_tokens=64)

    prompts = [engine.tokenizer.encode(f"Story {i}. {LONG_PROMPT}") for i in range(40)]
    requests = [WarmupRequest(i + 1, [p], None) for i, p in enumerate(prompts)]
    asked = 0

    def stop_after_three_steps() -> bool:
        nonlocal asked
        asked += 1
        return asked > 3

    report = run_warmup(engine, requests, should_stop=stop_after_three_steps)
    assert report.stopped and report.num_finished < report.num_prompts == 40
    assert not engine.has_unfinished_requests()
    manager = engine.scheduler.block_manager
    assert manager.num_free_blocks == manager.num_blocks  # nothing held by an aborted prompt
    _warmup_banner("warm.jsonl")(report)
    assert capsys.readouterr().err == (
        f"promptcache engine: the warm-up from warm.jsonl stopped at shutdown after "
        f"{report.seconds:.2f} s ({report.num_finished} of 40 prompts prefilled)\n"
    )
    progress: list[tuple[int, int]] = []
    whole = run_warmup(
        load_engine(max_num_batched_tokens=64),
        requests,
        should_stop=lambda: False,
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert not whole.stopped and whole.num_finished == whole.num_prompts == 40
    assert progress[0] == (0, 40) and progress[-1] == (40, 40)  # queued, then one per step
    assert [done for done, _ in progress] == sorted(done for done, _ in progress)
    assert len(progress) > 2  # 40 prompts in 64-token steps take several steps


def test_ctrl_c_during_a_long_warmup_stops_it_and_saves_what_it_cached(tmp_path: Path) -> None:
    """Ctrl-C while the engine thread warmed up waited for the whole warm-up; past the 10 s
    the shutdown waits for the thread, the process died with 'terminate called without an
    active exception' (exit 134) and wrote no block to --kv-disk."""
    import os
    import signal
    import subprocess

    warm = tmp_path / "warm.jsonl"
    lines = (json.dumps({"prompt": f"Story {i}: {LONG_PROMPT}"}) + "\n" for i in range(3000))
    warm.write_text("".join(lines), encoding="utf-8")
    command, port = _serve_command(
        TINYSTORIES, "--warmup", str(warm), "--kv-disk", str(tmp_path / "kv"), "--log-level", "info"
    )
    proc = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    assert proc.stderr is not None
    lines_seen = []
    for line in proc.stderr:
        lines_seen.append(line)
        if "Application startup complete" in line:  # the warm-up runs on the engine thread
            break
    prefilled = 0
    for _ in range(1200):  # Ctrl-C once some prompts are prefilled, so some blocks are cached
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=10)
        assert health.status_code == 503, health.text  # 3,000 prompts: still warming up
        prefilled = health.json().get("prompts_prefilled", 0)
        if prefilled:
            break
        time.sleep(0.05)
    assert prefilled and health.json()["prompts"] == 3000, health.text
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    stderr = "".join(lines_seen) + rest
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "terminate called" not in stderr
    [stopped] = [ln for ln in stderr.splitlines() if "stopped at shutdown" in ln]
    assert stopped.startswith(f"promptcache engine: the warm-up from {warm} stopped at shutdown")
    assert stopped.endswith(" of 3000 prompts prefilled)")
    done = int(stopped.rsplit("(", 1)[1].split(" of ")[0])
    assert prefilled <= done < 3000, stopped
    assert "cached KV blocks to the disk tier" in stderr
    assert list((tmp_path / "kv").glob("*/*.kvb"))
