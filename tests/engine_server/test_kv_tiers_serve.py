"""``engine serve --kv-ram / --kv-disk``: a restart finds its blocks on disk; tier hits are
reported in usage (``cached_tokens_by_tier``) and in /metrics (``tier`` label). Expected counts
come from the prompt's token ids and the block files on disk, not from the server."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import httpx
import openai
from server_support import LONG_PROMPT, TINYSTORIES, LiveServer, load_engine
from test_server_cli import _serve_command, _serving

from promptcache.engine.kv_tiers import BLOCK_FILE_SUFFIX
from promptcache.engine.kv_tiers.tiered_cache import MAX_STAGED_BLOCKS
from promptcache.engine.server import create_app
from promptcache.engine.tokenizer import Tokenizer

BLOCK = 16


def _metric(text: str, name: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith(name + " "))
    return float(line.split()[-1])


def test_a_restarted_server_serves_the_prefix_from_disk(tmp_path: Path) -> None:
    disk = tmp_path / "kv"
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", "tiny", "--kv-cache-bytes", "1MiB",
        "--kv-disk", str(disk),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    with _serving(command, base) as first:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        before = client.completions.create(
            model="tiny", prompt=LONG_PROMPT, max_tokens=8, temperature=0
        )
    assert "disk tier" in first.stderr and "holding 0 KV blocks" in first.stderr
    files = list(disk.glob(f"*/*{BLOCK_FILE_SUFFIX}"))
    prompt_ids = Tokenizer.from_pretrained(TINYSTORIES).encode(LONG_PROMPT)
    expected = (len(prompt_ids) - 1) // BLOCK * BLOCK
    # The prompt's full blocks and the full blocks of prompt + output were cached and flushed.
    assert len(files) == (len(prompt_ids) + 8 - 1) // BLOCK
    (files[0].parent / f"{7:032x}{BLOCK_FILE_SUFFIX}").write_bytes(b"not a block")  # damaged

    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", "tiny", "--kv-cache-bytes", "1MiB",
        "--kv-disk", str(disk),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    with _serving(command, base) as second:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        after = client.completions.create(
            model="tiny", prompt=LONG_PROMPT, max_tokens=8, temperature=0
        )
        metrics = httpx.get(f"{base}/metrics").text
    assert f"holding {len(files)} KV blocks" in second.stderr
    assert "; 1 damaged block file deleted at start" in second.stderr
    assert "deleted at start" not in first.stderr and "to fit" not in second.stderr
    # The start-up work the restarted server did before it was ready, and its cost.
    pool_blocks = re.search(r"(\d+) KV blocks of", second.stderr)
    assert pool_blocks is not None
    resident = min(len(files), int(pool_blocks.group(1)))
    buffers = min(len(files), MAX_STAGED_BLOCKS)
    pattern = (
        rf"; {resident} pool blocks and {buffers} disk read buffers? made resident at start "
        r"\(\d+ ms\)"
    )
    assert re.search(pattern, second.stderr), second.stderr
    assert "made resident" not in first.stderr  # an empty disk tier: nothing to make ready
    assert after.choices[0].text == before.choices[0].text
    assert after.usage is not None and after.usage.prompt_tokens_details is not None
    details = after.usage.prompt_tokens_details
    assert details.cached_tokens == expected
    extra = details.model_extra or {}
    assert extra["cached_tokens_by_tier"] == {"pool": 0, "ram": 0, "disk": expected}
    tier = "promptcache_engine_prefix_cache_tier_hits_tokens_total"
    assert _metric(metrics, f'{tier}{{tier="disk"}}') == expected
    assert _metric(metrics, f'{tier}{{tier="pool"}}') == 0
    assert _metric(metrics, 'promptcache_engine_kv_tier_blocks{tier="disk"}') == len(files)


def test_ram_tier_hits_are_reported_apart_from_pool_hits() -> None:
    engine = load_engine(num_blocks=8, kv_ram_bytes=2**20)  # 8 blocks of 16: 128 tokens
    other = "The little dog ran to the park. " * 19  # 7 blocks with its output
    with LiveServer(create_app(engine, served_model_names=["tiny"])) as live:
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0)
        cold = client.completions.create(
            model="tiny", prompt=LONG_PROMPT, max_tokens=4, temperature=0
        )
        warm = client.completions.create(
            model="tiny", prompt=LONG_PROMPT, max_tokens=4, temperature=0
        )
        client.completions.create(model="tiny", prompt=other, max_tokens=4)  # evicts
        ram = client.completions.create(
            model="tiny", prompt=LONG_PROMPT, max_tokens=4, temperature=0
        )
        metrics = httpx.get(f"{live.url}/metrics").text
    prompt_ids = engine.tokenizer.encode(LONG_PROMPT)
    expected = (len(prompt_ids) - 1) // BLOCK * BLOCK
    splits = []
    for reply in (cold, warm, ram):
        assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
        assert reply.choices[0].text == cold.choices[0].text
        splits.append(
            (reply.usage.prompt_tokens_details.model_extra or {})["cached_tokens_by_tier"]
        )
    assert splits[0] == {"pool": 0, "ram": 0, "disk": 0}
    assert splits[1] == {"pool": expected, "ram": 0, "disk": 0}
    assert splits[2]["ram"] > 0 and sum(splits[2].values()) == expected
    tier = "promptcache_engine_prefix_cache_tier_hits_tokens_total"
    assert _metric(metrics, f'{tier}{{tier="ram"}}') == splits[2]["ram"]
    assert _metric(metrics, f'{tier}{{tier="pool"}}') == expected + splits[2]["pool"]
    hits = _metric(metrics, "promptcache_engine_prefix_cache_hits_tokens_total")
    assert hits == sum(_metric(metrics, f'{tier}{{tier="{t}"}}') for t in ("pool", "ram", "disk"))


def _block_files_refused(command: list[str]) -> list[str]:
    """``command`` under a file size limit that key.json fits and a block file (about 16 KiB)
    does not: every block write fails with EFBIG, as a full disk fails it with ENOSPC."""
    limit = 4096
    return [
        sys.executable, "-c",
        "import os, resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "os.execv(sys.argv[1], sys.argv[1:])",
        *command,
    ]  # fmt: skip


def test_blocks_the_disk_refuses_at_shutdown_are_reported(tmp_path: Path) -> None:
    # a disk that takes no more (here a file size limit under one block file, which fails
    # every block write with EFBIG as a full disk fails it with ENOSPC): the server said
    # nothing, and a user expecting a warm restart found an empty tier
    disk = tmp_path / "kv"
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", "tiny", "--kv-cache-bytes", "1MiB",
        "--kv-disk", str(disk),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    with _serving(_block_files_refused(command), base) as served:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        client.completions.create(model="tiny", prompt=LONG_PROMPT, max_tokens=8, temperature=0)
    prompt_ids = Tokenizer.from_pretrained(TINYSTORIES).encode(LONG_PROMPT)
    blocks = (len(prompt_ids) + 8 - 1) // BLOCK  # the full blocks of prompt + output
    assert not list(disk.glob(f"*/*{BLOCK_FILE_SUFFIX}"))
    assert not list(disk.glob("*/*.tmp"))
    key_dir = next(disk.iterdir())
    expected = (
        f"could not write {blocks} of the {blocks} cached KV blocks not yet on the disk tier "
        f"{key_dir} (File too large); a restart will not find them"
    )
    assert expected in served.stderr, served.stderr
    assert "Traceback" not in served.stderr


def test_the_stop_counts_one_written_block_in_the_singular(tmp_path: Path) -> None:
    disk = tmp_path / "kv"
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", "tiny", "--kv-disk", str(disk), "--log-level", "info"
    )
    prompt = "Once upon a time, there was a dog."
    prompt_ids = Tokenizer.from_pretrained(TINYSTORIES).encode(prompt)
    assert (len(prompt_ids) + 8 - 1) // BLOCK == 1  # prompt + output fill one block
    base = f"http://127.0.0.1:{port}"
    with _serving(command, base) as served:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        reply = client.completions.create(
            model="tiny",
            prompt=prompt,
            max_tokens=8,
            temperature=0,
            extra_body={"ignore_eos": True},
        )
    assert reply.usage is not None and reply.usage.completion_tokens == 8
    assert len(list(disk.glob(f"*/*{BLOCK_FILE_SUFFIX}"))) == 1
    assert "INFO:     wrote 1 cached KV block to the disk tier\n" in served.stderr, served.stderr


def test_the_stop_says_how_many_written_blocks_the_disk_budget_keeps(tmp_path: Path) -> None:
    # --kv-disk-bytes for two block files: the stop writes every cached block, least recently
    # used first, and the budget deletes all but the last two. 'wrote N blocks' alone read as if
    # a restart would find N.
    disk = tmp_path / "kv"
    # tinystories: 2 layers x K/V x 16 tokens x 4 heads x 16 dims x fp32, + header and token ids
    file_bytes = 16_568
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", "tiny", "--kv-disk", str(disk),
        "--kv-disk-bytes", str(2 * file_bytes + 100), "--log-level", "info",
    )  # fmt: skip
    prompt = f"{LONG_PROMPT} {LONG_PROMPT}"
    prompt_ids = Tokenizer.from_pretrained(TINYSTORIES).encode(prompt)
    blocks = (len(prompt_ids) + 8 - 1) // BLOCK  # the full blocks of prompt + output
    assert blocks > 3
    base = f"http://127.0.0.1:{port}"
    with _serving(command, base) as served:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        client.completions.create(
            model="tiny",
            prompt=prompt,
            max_tokens=8,
            temperature=0,
            extra_body={"ignore_eos": True},
        )
    files = list(disk.glob(f"*/*{BLOCK_FILE_SUFFIX}"))
    assert [f.stat().st_size for f in files] == [file_bytes, file_bytes]
    expected = (
        f"INFO:     wrote {blocks} cached KV blocks to the disk tier, which keeps the 2 used "
        f"last within --kv-disk-bytes: the {blocks - 2} used longer ago were deleted, and a "
        "restart will not find them\n"
    )
    assert expected in served.stderr, served.stderr
    # the restart finds the two kept, the prompt's first blocks, as the stop said
    with _serving(command, base) as restarted:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        reply = client.completions.create(model="tiny", prompt=prompt, max_tokens=1)
        assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
        assert reply.usage.prompt_tokens_details.cached_tokens == 2 * BLOCK
    assert "holding 2 KV blocks" in restarted.stderr, restarted.stderr


def test_blocks_the_disk_refuses_while_serving_are_reported_once(tmp_path: Path) -> None:
    # a pool of 4 blocks: the second story evicts the first one's blocks to a disk that
    # refuses them; they were dropped without a word, the stop's count never saw them
    disk = tmp_path / "kv"
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", "tiny", "--kv-cache-bytes", "64KiB",
        "--kv-disk", str(disk),
    )  # fmt: skip
    stories = [
        "Once upon a time, there was a little girl named Lily. She liked to play outside "
        "with her friends in the big green park.",
        "The little dog ran to the park. The little dog ran to the park. The little dog ran.",
        "Tom had a red ball. He threw it high and his cat ran after it all day long.",
    ]
    tokenizer = Tokenizer.from_pretrained(TINYSTORIES)
    stories = [f"{story} {story}" for story in stories]
    sizes = [len(tokenizer.encode(story)) + 8 for story in stories]  # with the output
    assert all((n - 1) // BLOCK >= 2 and n <= 4 * BLOCK for n in sizes)  # 2 cached blocks each
    base = f"http://127.0.0.1:{port}"
    with _serving(_block_files_refused(command), base) as served:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        for story in stories:
            client.completions.create(model="tiny", prompt=story, max_tokens=8, temperature=0)
    warning = (
        f"could not write an evicted KV block to the disk tier {next(disk.iterdir())} "
        "(File too large); blocks evicted while the disk refuses them are dropped, and a "
        "restart will not find them"
    )
    assert served.stderr.count(warning) == 1, served.stderr
    assert not list(disk.glob(f"*/*{BLOCK_FILE_SUFFIX}"))


def test_a_block_file_damaged_on_disk_is_reported_when_read(tmp_path: Path) -> None:
    # a bit flipped in every block file after a clean stop: the restarted tier indexes them
    # (headers intact), the first read fails its CRC and the file is dropped, which the server
    # did without a word: the user saw a cold prefix and a file gone
    disk = tmp_path / "kv"
    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", "tiny", "--kv-disk", str(disk)
    )
    base = f"http://127.0.0.1:{port}"
    with _serving(command, base):
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        client.completions.create(model="tiny", prompt=LONG_PROMPT, max_tokens=8, temperature=0)
    files = sorted(disk.glob(f"*/*{BLOCK_FILE_SUFFIX}"))
    assert len(files) >= 2
    for path in files:
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF  # the payload's last byte
        path.write_bytes(bytes(data))

    command, port = _serve_command(
        TINYSTORIES, "--served-model-name", "tiny", "--kv-disk", str(disk)
    )
    base = f"http://127.0.0.1:{port}"
    with _serving(command, base) as second:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        reply = client.completions.create(
            model="tiny", prompt=LONG_PROMPT, max_tokens=8, temperature=0
        )
    assert f"holding {len(files)} KV blocks" in second.stderr
    assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
    assert reply.usage.prompt_tokens_details.cached_tokens == 0  # the first block failed
    # one file read (the match ends at it), dropped, and written again at the stop
    warnings = [ln for ln in second.stderr.splitlines() if "dropped the KV block file" in ln]
    assert len(warnings) == 1, second.stderr
    named = re.fullmatch(
        r"WARNING:  dropped the KV block file (\S+) \(its header, token ids or CRC-32 do not "
        r"match\); its tokens are computed again",
        warnings[0],
    )
    assert named is not None and Path(named.group(1)) in files, warnings[0]
