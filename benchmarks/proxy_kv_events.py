"""Routing CPU per request of the proxy's ``kv_events`` policy, and where it goes.

Setup (no sockets, no servers: the policy's feed is fed directly, so only routing is timed):
4 replicas whose indexes each hold ``--blocks`` KV blocks (default 10,000: stored chains of
8 tenants' system prompts plus unrelated filler chains), and chat requests of ``--tenants``
tenants, each with its own ``--system-tokens``-token system prompt (tinystories tokenizer,
block size 16) and a short user turn. Per request the policy parses and tokenises the body with
the engine's parser (chat template + tokenizer), hashes its blocks (SHA-256 per block) and
counts each replica's leading blocks.

Reported (microseconds per request, the median of ``--repeats`` runs of ``--requests``
requests each, wall-clock and the process's CPU time): the whole ``choose``, and its parts
measured separately on the same bodies: ``parse + tokenise`` (``PromptHasher.prompt``, through
its piece cache: each request repeats a tenant's system prompt with a new question, so it
tokenises its new tail only) and ``hash blocks`` (``PromptHasher.hashes`` less ``prompt``: the
blocks a repeat shares with the recent prompt it was tokenised against take that prompt's
hashes, the rest go through the policy's ``BlockHashCache``); the rest is the lookups and the
decision. For comparison, without the caches: the engine tokenizer on the whole rendered
prompt, and ``prefix_block_hashes`` on every block. Every request is checked to be routed to the
replica that holds its tenant's blocks, at the full depth of its system prompt.

Usage::

    .venv/bin/python benchmarks/proxy_kv_events.py
    .venv/bin/python benchmarks/proxy_kv_events.py --requests 200 --repeats 5 --blocks 10000
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from promptcache.engine.block_manager import prefix_block_hashes
from promptcache.engine.kv_events import BlockStored, KVEventBatch, external_block_hash
from promptcache.proxy.routing import Replica, RequestFacts, RoutingSettings
from promptcache.proxy.routing.kv_events import KVEventsPolicy

ROOT = Path(__file__).resolve().parents[1]
TINYSTORIES = ROOT.parent / "shared" / "models" / "tinystories-656k"
TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
BLOCK_SIZE = 16
REPLICAS = 4
STORY = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside in the "
    "park with her friends. One day, she found a big red ball under a tree. "
)


def _system_prompt(policy: KVEventsPolicy, tenant: int, tokens: int) -> str:
    text = f"Tenant {tenant} rules. "
    while len(policy.hasher.tokenizer.encode(text)) < tokens:
        text += f"{STORY}Rule {tenant}-{len(text)}. "
    return text


def _body(system: str, user: str) -> dict[str, Any]:
    return {
        "model": "tiny",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "max_tokens": 16,
    }


def _store(policy: KVEventsPolicy, replica: int, tokens: list[int]) -> int:
    hashes = prefix_block_hashes(tokens, BLOCK_SIZE)
    event = BlockStored(
        [external_block_hash(h) for h in hashes],
        None,
        tokens[: len(hashes) * BLOCK_SIZE],
        BLOCK_SIZE,
        None,
        "GPU",
    )
    policy.feed.blocks[replica].apply(KVEventBatch(time.time(), [event]))
    return len(hashes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=10_000, help="blocks indexed per replica")
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--system-tokens", type=int, default=1024)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "chat.jinja"
        template.write_text(TEMPLATE, encoding="utf-8")
        options = {
            "kv_events_endpoints": [f"tcp://127.0.0.1:{5557 + i}" for i in range(REPLICAS)],
            "tokenizer": str(TINYSTORIES),
            "chat_template": str(template),
        }
        settings = RoutingSettings(policy="kv_events", options=options)
        policy = KVEventsPolicy(settings, [f"http://r{i}" for i in range(REPLICAS)])
    systems = [_system_prompt(policy, t, args.system_tokens) for t in range(args.tenants)]
    home: dict[int, tuple[int, int]] = {}  # tenant -> (replica, blocks of its system turn)
    for tenant, system in enumerate(systems):
        tokens, _ = policy.hasher.prompt("openai_chat", _body(system, "x"))
        replica = tenant % REPLICAS
        home[tenant] = (replica, _store(policy, replica, tokens))
    filler = policy.hasher.tokenizer.encode(STORY * 40)
    for replica in range(REPLICAS):
        index = policy.feed.blocks[replica]
        salt = 0
        while index.num_blocks < args.blocks:
            salt += 1
            tokens = [salt // 1000 + 1, salt % 1000 + 1, *filler[: BLOCK_SIZE * 63]]
            _store(policy, replica, tokens[: BLOCK_SIZE * min(63, args.blocks - index.num_blocks)])
    replicas = [Replica(i, f"http://r{i}") for i in range(REPLICAS)]
    requests = [
        (i % args.tenants, _body(systems[i % args.tenants], f"Question {i}: what happens next?"))
        for i in range(args.requests)
    ]
    for tenant, body in requests:  # correctness first: the home replica, at full depth
        decision = policy.choose(RequestFacts("openai_chat", "tiny", body=body), replicas)
        replica, depth = home[tenant]
        assert decision.replica.index == replica and decision.reason == "kv_events", decision
        assert decision.depth >= depth - 1, (decision.depth, depth)
        policy.pending.forget(decision.replica.index)

    def per_request(fn: Any) -> tuple[float, float]:
        """(wall, CPU) microseconds per request: medians over the repeats."""
        wall, cpu = [], []
        for _ in range(args.repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            for tenant, body in requests:
                fn(tenant, body)
            cpu.append((time.process_time() - start_cpu) / len(requests) * 1e6)
            wall.append((time.perf_counter() - start) / len(requests) * 1e6)
        return statistics.median(wall), statistics.median(cpu)

    tokenised = {id(b): policy.hasher.prompt("openai_chat", b)[0] for _, b in requests}
    choose_us = per_request(
        lambda t, b: policy.choose(RequestFacts("openai_chat", "tiny", body=b), replicas)
    )
    parse_us = per_request(lambda t, b: policy.hasher.prompt("openai_chat", b))
    hashes_us = per_request(lambda t, b: policy.hasher.hashes("openai_chat", b, BLOCK_SIZE))
    engine = getattr(policy.hasher.tokenizer, "tokenizer", policy.hasher.tokenizer)
    rendered = {
        id(b): engine.apply_chat_template(b["messages"], add_generation_prompt=True)
        for _, b in requests
    }
    whole_us = per_request(lambda t, b: engine.encode(rendered[id(b)], add_special_tokens=False))
    raw_hash_us = per_request(lambda t, b: prefix_block_hashes(tokenised[id(b)], BLOCK_SIZE))
    prompt_tokens = statistics.median(len(v) for v in tokenised.values())
    python = sys.version.split()[0]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {python}, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{REPLICAS} replicas x {args.blocks:,} indexed blocks; {args.tenants} tenants; "
          f"{prompt_tokens:.0f}-token prompts ({prompt_tokens // BLOCK_SIZE:.0f} blocks); "
          f"{args.requests} requests x {args.repeats} repeats")  # fmt: skip
    print("us per request               wall      CPU")
    rows = [
        ("choose (whole policy)", choose_us),
        ("  parse + tokenise", parse_us),
        ("  hash blocks", (hashes_us[0] - parse_us[0], hashes_us[1] - parse_us[1])),
        ("  lookups + decision", (choose_us[0] - hashes_us[0], choose_us[1] - hashes_us[1])),
        ("without the caches:", None),
        ("  tokenise the whole prompt", whole_us),
        ("  hash every block", raw_hash_us),
    ]
    for name, figures in rows:
        if figures is None:
            print(name)
        else:
            print(f"{name:26s} {figures[0]:8.1f} {figures[1]:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
