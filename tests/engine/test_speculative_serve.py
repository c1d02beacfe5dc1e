"""``engine serve --speculative-config``: bad values are one-line errors; a real server on
tinystories answers as plain greedy decoding does and reports its draft counters in /metrics."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
from click.testing import CliRunner

from promptcache.cli import cli
from promptcache.engine import LLMEngine, SamplingParams

SPEC = {
    "method": "ngram",
    "num_speculative_tokens": 4,
    "prompt_lookup_max": 3,
    "prompt_lookup_min": 2,
}
PROMPT = "Tom and his dog went to the park. Tom and his dog went to the park. Tom and his dog"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{oops", "error: speculative_config is not valid JSON"),
        ('{"method": "ngram"}', "error: speculative_config needs num_speculative_tokens"),
        (
            '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 3, '
            '"prompt_lookup_max": 2}',
            "error: speculative_config prompt_lookup_min=3 must be <= prompt_lookup_max=2",
        ),
        ('{"method": "medusa", "num_speculative_tokens": 2}', "method must be one of ngram"),
        (
            '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 0}',
            "error: speculative_config prompt_lookup_min must be >= 1, got 0",
        ),
        ("null", '"num_speculative_tokens": 4}, got null'),
        # a bad value is shown as it was written in JSON, not as Python prints it
        (
            '{"method": "ngram", "num_speculative_tokens": true}',
            "error: speculative_config num_speculative_tokens must be an integer, got true",
        ),
        (
            '{"method": "ngram", "num_speculative_tokens": "4"}',
            'error: speculative_config num_speculative_tokens must be an integer, got "4"',
        ),
        (
            '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": false}',
            "error: speculative_config prompt_lookup_max must be an integer, got false",
        ),
        (
            '{"method": "ngram", "num_speculative_tokens": [4]}',
            "error: speculative_config num_speculative_tokens must be an integer, got [4]",
        ),
        ('{"method": null, "num_speculative_tokens": 2}', "draft model), got null"),
        ('{"method": "medusa", "num_speculative_tokens": 2}', 'draft model), got "medusa"'),
    ],
)
def test_bad_speculative_config_is_a_one_line_error(
    tinystories_dir: Path, value: str, message: str
) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "engine", "serve", "--model", str(tinystories_dir), "--port", str(_free_port()),
            "--speculative-config", value,
        ],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match is not None, f"{name} missing from /metrics"
    return float(match.group(1))


def test_server_decodes_as_plain_greedy_and_counts_drafts(tinystories_dir: Path) -> None:
    params = SamplingParams(temperature=0, max_tokens=48)
    plain = LLMEngine.from_pretrained(tinystories_dir)
    plain.add_request("p", PROMPT, params)
    spec = LLMEngine.from_pretrained(tinystories_dir, speculative_config=SPEC)
    spec.add_request("s", PROMPT, params)
    texts = {}
    for name, engine in (("plain", plain), ("spec", spec)):
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    texts[name] = out.text
    assert texts["spec"] == texts["plain"]
    want = spec.stats()
    assert want.spec_decode_num_accepted_tokens > 0

    port = _free_port()
    command = [
        str(Path(sys.executable).with_name("promptcache")), "engine", "serve",
        "--model", str(tinystories_dir), "--port", str(port), "--log-level", "warning",
        "--threads", "1", "--served-model-name", "tiny",
        "--speculative-config", json.dumps(SPEC),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.2)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x")
        reply = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=48, temperature=0)
        assert reply.choices[0].text == texts["plain"]
        metrics = httpx.get(f"{base}/metrics").text
        prefix = "promptcache_engine_spec_decode_"
        assert _metric(metrics, prefix + "num_drafts_total") == want.spec_decode_num_drafts
        assert (
            _metric(metrics, prefix + "num_draft_tokens_total") == want.spec_decode_num_draft_tokens
        )
        assert (
            _metric(metrics, prefix + "num_accepted_tokens_total")
            == want.spec_decode_num_accepted_tokens
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert (
        "promptcache engine: speculative decoding by prompt lookup: up to 4 draft tokens per "
        "step from n-gram matches of 2 to 3 tokens in each request's prompt and output"
    ) in stderr
