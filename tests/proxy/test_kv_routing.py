"""The ``kv_events`` policy: two real ``promptcache engine serve`` replicas publish KV events and
the proxy routes by the blocks they report; plus the policy's rules on a fed index."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from port_support import free_ports
from proxy_support import read_rows, wait_until_serving
from servers import ServerThread

from promptcache.engine.kv_events import BlockStored, KVEventBatch
from promptcache.errors import ConfigError
from promptcache.proxy.app import build_app
from promptcache.proxy.config import ProxyConfig, UpstreamConfig
from promptcache.proxy.routing import Replica, RequestFacts, RoutingSettings
from promptcache.proxy.routing.kv_events import PENDING_TTL_S, SILENT_FEED_S, KVEventsPolicy

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
BLOCK_SIZE = 16
SYSTEM_A = (
    "You are a storyteller. Every story is about a little girl named Lily, her dog Max and a "
    "big red ball that rolls down the hill into the park where the children play all day."
)
SYSTEM_B = (
    "You answer questions about the farm. The farm has three cows, two horses, a pond with "
    "ducks and a red barn where the old farmer keeps his tractor and the hay for winter."
)


def _chat(system: str, user: str) -> dict[str, Any]:
    return {
        "model": "tiny",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "max_tokens": 2,
        "temperature": 0,
    }


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def template_file(tmp_path: Path) -> Path:
    path = tmp_path / "chat.jinja"
    path.write_text(TEMPLATE, encoding="utf-8")
    return path


@pytest.fixture
def engines(template_file: Path) -> Iterator[list[dict[str, str]]]:
    """Two engine replicas, each publishing KV events with a replay socket."""
    procs: list[subprocess.Popen[str]] = []
    replicas = []
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    ports = free_ports(6)  # distinct: each replica's HTTP, events and replay sockets
    try:
        for i in range(2):
            port, events, replay = ports[3 * i : 3 * i + 3]
            command = [
                str(Path(sys.executable).with_name("promptcache")), "engine", "serve",
                "--model", str(TINYSTORIES), "--port", str(port), "--served-model-name", "tiny",
                "--chat-template", str(template_file), "--threads", "1", "--log-level", "warning",
                "--kv-cache-bytes", "1MiB",  # 64 blocks of 16 tokens
                "--kv-events-endpoint", f"tcp://127.0.0.1:{events}",
                "--kv-events-replay-endpoint", f"tcp://127.0.0.1:{replay}",
            ]  # fmt: skip
            procs.append(subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env))
            replicas.append(
                {
                    "url": f"http://127.0.0.1:{port}",
                    "events": f"tcp://127.0.0.1:{events}",
                    "replay": f"tcp://127.0.0.1:{replay}",
                }
            )
        for proc, replica in zip(procs, replicas, strict=True):
            wait_until_serving(proc, f"{replica['url']}/health", timeout_s=90)
        yield replicas
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            _, err = proc.communicate(timeout=30)
            assert "KV events on tcp://127.0.0.1:" in err, err


def _settings(replicas: list[dict[str, str]], template: str, **extra: Any) -> RoutingSettings:
    options = {
        "kv_events_endpoints": [r["events"] for r in replicas],
        "kv_events_replay_endpoints": [r["replay"] for r in replicas],
        "tokenizer": str(TINYSTORIES),
        "chat_template": template,
    }
    return RoutingSettings(policy="kv_events", health_interval_s=60.0, options=options, **extra)


def test_the_proxy_routes_by_the_blocks_each_engine_reports(
    engines: list[dict[str, str]], template_file: Path, tmp_path: Path
) -> None:
    upstream = UpstreamConfig(
        name="fleet",
        url=engines[0]["url"],
        vendor="engine",
        replicas=tuple(r["url"] for r in engines),
        routing=_settings(engines, str(template_file)),
    )
    db = tmp_path / "log.db"
    config = ProxyConfig(
        upstreams={"fleet": upstream}, default_upstream="fleet", db_path=db, flush_interval_s=0.05
    )
    app = build_app(config)
    with ServerThread(app) as proxy:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="k", max_retries=0)
        policy = app.state.proxy.routers["fleet"].policy
        assert isinstance(policy, KVEventsPolicy)

        def ask(system: str, user: str) -> int:
            reply = client.chat.completions.create(**_chat(system, user))
            assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
            return reply.usage.prompt_tokens_details.cached_tokens or 0

        def settled() -> bool:  # every replica's events of the requests so far have arrived
            return all(
                b.num_blocks > 0 for b, r in zip(policy.feed.blocks, served, strict=True) if r
            )

        served = [False, False]
        cached = [ask(SYSTEM_A, "Tell me a story.")]  # nothing known yet: least loaded (0)
        served[0] = True
        _wait(settled, "replica 0's events")
        cached.append(ask(SYSTEM_B, "How many cows?"))  # nothing of it anywhere: least loaded (1)
        served[1] = True
        _wait(settled, "replica 1's events")
        cached.append(ask(SYSTEM_A, "Another story, please."))  # replica 0 holds its blocks
        cached.append(ask(SYSTEM_B, "Where is the tractor?"))  # replica 1 holds its blocks
        deadline = time.monotonic() + 10
        while len(rows := read_rows(db)) < 4 and time.monotonic() < deadline:
            app.state.store.flush()
            time.sleep(0.05)
    assert [r["replica"] for r in rows] == [engines[i]["url"] for i in (0, 1, 0, 1)]
    assert [r["route_policy"] for r in rows] == ["kv_events"] * 4
    assert [r["route_reason"] for r in rows] == ["least_loaded", "new_prefix", "kv_events",
                                                 "kv_events"]  # fmt: skip
    # Exact: the depth the proxy computed is what the engine then served from its cache.
    depths = [r["route_depth"] for r in rows]
    assert depths[2] > 0 and depths[3] > 0
    assert [d * BLOCK_SIZE for d in depths] == cached


# The policy's rules, on an index fed directly (no sockets: the feed is never started). --------


@pytest.fixture
def policy(template_file: Path) -> KVEventsPolicy:
    fake = [{"events": f"tcp://127.0.0.1:{i + 1}", "replay": f"tcp://127.0.0.1:{i + 4}"}
            for i in range(3)]  # fmt: skip
    return KVEventsPolicy(
        _settings(fake, str(template_file), load_margin=2), ["http://a", "http://b", "http://c"]
    )


def _hold(policy: KVEventsPolicy, replica: int, body: dict[str, Any], blocks: int) -> None:
    """Replica ``replica`` reports the first ``blocks`` blocks of ``body`` stored."""
    hashes = policy.hasher.hashes("openai_chat", body, BLOCK_SIZE)
    assert hashes is not None and len(hashes[0]) >= blocks
    tokens, _ = policy.hasher.prompt("openai_chat", body)
    event = BlockStored(
        hashes[0][:blocks],
        None,
        tokens[: blocks * BLOCK_SIZE],
        BLOCK_SIZE,
        None,
        "GPU",
    )
    policy.feed.blocks[replica].apply(KVEventBatch(time.time(), [event]))


def test_policy_prefers_the_deepest_holder_within_the_load_margin(policy: KVEventsPolicy) -> None:
    replicas = [Replica(i, f"http://{c}") for i, c in enumerate("abc")]
    body = _chat(SYSTEM_A, "Tell me a story.")
    facts = RequestFacts(api="openai_chat", model="tiny", body=body)
    first = policy.choose(facts, replicas)  # no events from anyone yet
    assert (first.replica.index, first.reason, first.depth) == (0, "least_loaded", 0)
    policy.pending.forget(0)
    _hold(policy, 1, body, 2)
    _hold(policy, 2, body, 3)
    assert policy.feed.blocks[2].native  # our hash of the tokens: used as published
    deepest = policy.choose(facts, replicas)
    assert (deepest.replica.index, deepest.reason, deepest.depth) == (2, "kv_events", 3)
    replicas[2].in_flight = 3  # 3 above the least loaded: more than the margin of 2
    overloaded = policy.choose(facts, replicas)
    assert (overloaded.replica.index, overloaded.reason, overloaded.depth) == (0, "overloaded", 3)
    # The overloaded request went to a: a now counts as holding all of it, until events come.
    assert policy.choose(facts, replicas).replica.index == 0
    policy.pending.forget(0)
    replicas[2].in_flight = 2  # exactly the margin: still the holder
    assert policy.choose(facts, replicas).replica.index == 2
    other = RequestFacts(api="openai_chat", model="tiny", body=_chat(SYSTEM_B, "Cows?"))
    replicas[0].in_flight = 1
    fresh = policy.choose(other, replicas)  # a prefix nobody holds: the least loaded (b)
    assert (fresh.replica.index, fresh.reason) == (1, "new_prefix")
    # ... and the next request of that prefix follows it before any event arrives.
    follow = policy.choose(other, replicas)
    assert (follow.replica.index, follow.reason) == (1, "kv_events") and follow.depth > 0
    # Its events never came (evicted at once) and the pending window passed: it goes back to
    # the replica it was sent to, although that one is now the busiest within the margin.
    policy.pending.forget(1)
    replicas[1].in_flight = 3
    back = policy.choose(other, replicas)
    assert (back.replica.index, back.reason, back.depth) == (1, "affinity", 0)
    unparsable = RequestFacts(api="openai_chat", model="tiny", body={"messages": 3})
    assert policy.choose(unparsable, replicas).reason == "least_loaded"


def test_kv_events_config_errors(template_file: Path) -> None:
    urls = ["http://a", "http://b"]
    with pytest.raises(ConfigError, match="needs kv_events_endpoints"):
        KVEventsPolicy(RoutingSettings(policy="kv_events"), urls)
    one = [{"events": "tcp://127.0.0.1:1", "replay": "tcp://127.0.0.1:2"}]
    with pytest.raises(ConfigError, match="lists 1 address"):
        KVEventsPolicy(_settings(one, str(template_file)), urls)
    two = [*one, {"events": "tcp://127.0.0.1:3", "replay": "tcp://127.0.0.1:4"}]
    settings = _settings(two, str(template_file))
    bad = RoutingSettings(
        policy="kv_events", options={**settings.options, "tokenizer": "/no/such/model"}
    )
    with pytest.raises(ConfigError, match="kv_events tokenizer"):
        KVEventsPolicy(bad, urls)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1:5557", "is not a ZeroMQ address (Invalid argument)"),
        ("tcp://*:5557", "is not a ZeroMQ address (Invalid argument)"),
        ("http://127.0.0.1:5557", "is not a ZeroMQ address (Protocol not supported)"),
        ("tcp://127.0.0.1:70000", "has port '70000', not one of 1-65535"),
    ],
)
def test_an_address_no_subscriber_can_connect_to_is_a_config_error(
    template_file: Path, address: str, why: str
) -> None:
    # the feed's thread died on it ('Exception in thread promptcache-kv-feed: ... ZMQError:
    # Invalid argument'), the proxy waited 10 s for it, then served with no KV events at all
    for key in ("kv_events_endpoints", "kv_events_replay_endpoints"):
        good = _settings([{"events": "tcp://127.0.0.1:1", "replay": "tcp://127.0.0.1:2"},
                          {"events": "tcp://127.0.0.1:5", "replay": "tcp://127.0.0.1:6"}],
                         str(template_file))  # fmt: skip
        options = {**good.options, key: ["tcp://127.0.0.1:3", address]}
        with pytest.raises(ConfigError) as refused:
            KVEventsPolicy(RoutingSettings(policy="kv_events", options=options), ["a", "b"])
        assert str(refused.value) == (
            f"{key}: {address!r} {why}; give the address a subscriber connects to, "
            "tcp://HOST:PORT (the engine's --kv-events-endpoint with its host: tcp://* binds, "
            "it does not connect)"
        )


def test_one_address_for_two_replicas_is_a_config_error(template_file: Path) -> None:
    # accepted: both feeds followed one engine, so the other replica was credited with its
    # blocks (a request routed there as 'kv_events', 6 blocks held, read 0 from its cache) and
    # its own events were never heard, nor warned of
    urls = ["http://127.0.0.1:8001", "http://user:pw@127.0.0.1:8002"]
    flags = {
        "kv_events_endpoints": "--kv-events-endpoint",
        "kv_events_replay_endpoints": "--kv-events-replay-endpoint",
    }
    for key, flag in flags.items():
        good = _settings([{"events": "tcp://127.0.0.1:1", "replay": "tcp://127.0.0.1:2"},
                          {"events": "tcp://127.0.0.1:3", "replay": "tcp://127.0.0.1:4"}],
                         str(template_file))  # fmt: skip
        options = {**good.options, key: ["tcp://localhost:5557", "tcp://LOCALHOST:5557"]}
        with pytest.raises(ConfigError) as refused:
            KVEventsPolicy(RoutingSettings(policy="kv_events", options=options), urls)
        assert str(refused.value) == (
            f"{key} lists 'tcp://LOCALHOST:5557' for both http://127.0.0.1:8001 and "
            "http://***@127.0.0.1:8002; each replica publishes its own KV events: give each "
            f"the address of its own engine's {flag}, in the order of `replicas`"
        )


def test_a_fleet_table_configures_kv_events(tmp_path: Path, template_file: Path) -> None:
    from promptcache.proxy.config import load_config_file

    path = tmp_path / "fleet.toml"
    path.write_text(
        'default_upstream = "fleet"\n[upstreams.fleet]\n'
        'replicas = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]\n'
        'policy = "kv_events"\nload_margin = 1\n'
        'kv_events_endpoints = ["tcp://127.0.0.1:5557", "tcp://127.0.0.1:5567"]\n'
        f'tokenizer = "{TINYSTORIES}"\nchat_template = "{template_file}"\n',
        encoding="utf-8",
    )
    routing = load_config_file(path).upstreams["fleet"].routing
    assert routing is not None and routing.policy == "kv_events"
    policy = KVEventsPolicy(routing, ["http://127.0.0.1:8001", "http://127.0.0.1:8002"])
    assert [e.replay_endpoint for e in policy.feed.endpoints] == [None, None]
    assert policy.load_margin == 1
    path.write_text(path.read_text().replace('"tcp://127.0.0.1:5567"', "5567"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[upstreams.fleet\].*kv_events_endpoints must be"):
        load_config_file(path)


def test_routing_regret_is_what_the_best_replica_would_have_served(
    engines: list[dict[str, str]], template_file: Path, tmp_path: Path
) -> None:
    """A request sent past its holder (load margin 0, the holder busy) logs as regret exactly
    the cached tokens the holder reports when the same request is then sent to it directly,
    less those the chosen replica reported."""
    upstream = UpstreamConfig(
        name="fleet",
        url=engines[0]["url"],
        vendor="engine",
        replicas=tuple(r["url"] for r in engines),
        routing=_settings(engines, str(template_file), load_margin=0),
    )
    db = tmp_path / "log.db"
    config = ProxyConfig(
        upstreams={"fleet": upstream}, default_upstream="fleet", db_path=db, flush_interval_s=0.05
    )
    app = build_app(config)
    usages: list[tuple[int, int]] = []

    def ask(base_url: str, system: str, user: str) -> int:
        client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="k", max_retries=0)
        reply = client.chat.completions.create(**_chat(system, user))
        assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
        cached = reply.usage.prompt_tokens_details.cached_tokens or 0
        if base_url != engines[0]["url"]:
            usages.append((cached, reply.usage.prompt_tokens))
        return cached

    with ServerThread(app) as proxy:
        router = app.state.proxy.routers["fleet"]
        policy = router.policy
        assert isinstance(policy, KVEventsPolicy)
        ask(proxy.url, SYSTEM_A, "Tell me a story.")  # replica 0
        _wait(lambda: policy.feed.blocks[0].num_blocks > 0, "replica 0's events")
        with router.track(router.replicas[0]):  # replica 0 busy: 1 above replica 1 > margin 0
            routed = ask(proxy.url, SYSTEM_A, "Another story, please.")
        deadline = time.monotonic() + 10
        while len(rows := read_rows(db)) < 2 and time.monotonic() < deadline:
            app.state.store.flush()
            time.sleep(0.05)
        metrics = httpx.get(f"{proxy.url}/metrics").text  # the hooks ran before the rows queued
    # the independent count: what the holder serves from its cache for the same request
    direct = ask(engines[0]["url"], SYSTEM_A, "Another story, please.")
    row = rows[1]
    assert (row["replica"], row["route_reason"]) == (engines[1]["url"], "overloaded")
    assert direct > 0 and row["route_best_tokens"] == direct
    assert row["route_chosen_tokens"] == routed
    regret = direct - routed
    assert regret > 0
    assert rows[0]["route_best_tokens"] == rows[0]["route_chosen_tokens"] == 0
    r1 = engines[1]["url"]
    assert f'promptcache_route_regret_tokens_total{{replica="{r1}",upstream="fleet"}} ' \
        f"{float(regret)}" in metrics  # fmt: skip
    assert f'promptcache_route_available_tokens_total{{replica="{r1}",upstream="fleet"}} ' \
        f"{float(direct)}" in metrics  # fmt: skip
    # token-weighted: the replicas' cached tokens over their prompt tokens, as the client saw
    rate = sum(c for c, _ in usages) / sum(p for _, p in usages)
    line = next(x for x in metrics.splitlines() if x.startswith("promptcache_fleet_hit_rate{"))
    assert float(line.split()[-1]) == pytest.approx(rate)


def test_a_replica_that_publishes_no_events_is_named_once(
    template_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a wrong kv_events_endpoints entry or topic left the fleet routing blind without a word:
    # every request least_loaded / new_prefix, the proxy serving as if all were well
    now = [100.0]
    fake = [
        {"events": "tcp://127.0.0.1:1", "replay": "tcp://127.0.0.1:2"},
        {"events": "tcp://127.0.0.1:3", "replay": "tcp://127.0.0.1:4"},
    ]
    policy = KVEventsPolicy(
        _settings(fake, str(template_file)), ["http://a", "http://b"], clock=lambda: now[0]
    )
    replicas = [Replica(0, "http://a"), Replica(1, "http://b")]
    long_a = RequestFacts(api="openai_chat", model="tiny", body=_chat(SYSTEM_A, "Why?"))
    long_b = RequestFacts(api="openai_chat", model="tiny", body=_chat(SYSTEM_B, "Why?"))
    short = RequestFacts(
        api="openai_completions", model="tiny", body={"model": "tiny", "prompt": "Once upon"}
    )
    hashes = policy.hasher.hashes("openai_completions", short.body or {}, BLOCK_SIZE)
    assert hashes is not None and not hashes[0]  # shorter than a block: no event is due
    with caplog.at_level("WARNING", logger="promptcache.proxy.routing"):
        assert policy.choose(long_a, replicas).replica.index == 0
        assert policy.choose(long_b, [replicas[1]]).replica.index == 1
        _hold(policy, 0, long_a.body or {}, 2)  # replica a publishes; b never does
        now[0] += SILENT_FEED_S - 1
        policy.choose(long_b, [replicas[1]])
        assert caplog.records == []  # not yet
        now[0] += 2
        for _ in range(3):
            policy.choose(short, [replicas[1]])
        assert caplog.records == []  # prompts of no full block ask for no event
        for _ in range(3):
            policy.choose(long_a, replicas[:1])
            policy.choose(long_b, [replicas[1]])
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        f"kv_events: replica http://b was sent 3 requests of at least one full KV block since "
        f"{SILENT_FEED_S + 1:.0f} s ago but has published no KV event on tcp://127.0.0.1:3 "
        "(topic 'kv-events'): check kv_events_endpoints entry 2 against its engine's "
        "--kv-events-endpoint, and kv_events_topic against its --kv-events-topic; until its "
        "events arrive the proxy cannot know what its cache holds"
    ]


def _reference_choice(
    policy: KVEventsPolicy, facts: RequestFacts, candidates: list[Replica], now: float
) -> tuple[int, str, int, int | None, int | None]:
    """The policy's rules written out plainly over its state (every replica's depths walked in
    full): (replica, reason, depth, best tokens, chosen tokens)."""
    assert facts.body is not None
    hashes = policy.hasher.hashes(facts.api, facts.body, BLOCK_SIZE)
    least = min(candidates, key=lambda r: r.load)
    if hashes is None:
        return least.index, "least_loaded", 0, None, None
    salted, unsalted = hashes

    def leading(hashes: list[int], holds: Callable[[int], bool]) -> int:
        count = 0
        while count < len(hashes) and holds(hashes[count]):
            count += 1
        return count

    held, home = {}, {}
    for r in candidates:
        state = policy.feed.blocks[r.index]
        if state.native:
            events = leading(salted, state.published.__contains__)
        else:
            events = leading(unsalted, state._rebuilt.__contains__)
        pending = policy.pending._by_replica.get(r.index, {})
        fresh = {h for h, until in pending.items() if until >= now}
        held[r.index] = max(events, leading(salted, fresh.__contains__))
        mine = {h for h, at in policy.homes._replica.items() if at == r.index}
        home[r.index] = leading(salted, mine.__contains__)
    best = min(candidates, key=lambda r: (-held[r.index], -home[r.index], r.load))
    depth = held[best.index]
    if depth == 0 and home[best.index] == 0:
        known = any(policy.feed.blocks[r.index].num_batches for r in candidates)
        return least.index, "new_prefix" if known else "least_loaded", 0, 0, 0
    if best.in_flight - least.in_flight > policy.load_margin:
        return least.index, "overloaded", depth, depth * BLOCK_SIZE, held[least.index] * BLOCK_SIZE
    reason = "kv_events" if depth else "affinity"
    return best.index, reason, depth, depth * BLOCK_SIZE, depth * BLOCK_SIZE


def test_choices_follow_the_rules_over_random_holdings_loads_and_pending_windows(
    template_file: Path,
) -> None:
    """Random events, loads, clock steps and resets: every decision is the one the rules give
    when each replica's stored, pending and home depths are counted in full."""
    now = [100.0]
    fake = [{"events": f"tcp://127.0.0.1:{i + 1}", "replay": f"tcp://127.0.0.1:{i + 4}"}
            for i in range(3)]  # fmt: skip
    policy = KVEventsPolicy(
        _settings(fake, str(template_file), load_margin=1, max_prefixes=40),
        ["http://a", "http://b", "http://c"],
        clock=lambda: now[0],
    )
    replicas = [Replica(i, f"http://{c}") for i, c in enumerate("abc")]
    rng = random.Random(31)
    bodies = [
        _chat(system, question)
        for system in (SYSTEM_A, SYSTEM_B, SYSTEM_A[:90] + SYSTEM_B[90:])
        for question in ("Tell me a story.", "Why?", "And then what happened to the ball?")
    ]
    bodies += [{**body, "cache_salt": "t1"} for body in bodies[:3]]
    reasons = set()
    for step in range(500):
        action = rng.random()
        body = rng.choice(bodies)
        if action < 0.08:
            hashes = policy.hasher.hashes("openai_chat", body, BLOCK_SIZE)
            if hashes is not None and hashes[0]:
                _hold(policy, rng.randrange(3), body, rng.randint(1, len(hashes[0])))
            continue
        if action < 0.16:
            now[0] += rng.choice([1.0, 5.0, PENDING_TTL_S + 1])
            continue
        if action < 0.18:
            policy.replica_down(replicas[rng.randrange(3)])  # pending and homes forgotten
            continue
        if action < 0.3:
            policy.feed.blocks[rng.randrange(3)].clear()  # the engine evicted everything
            continue
        for replica in replicas:
            replica.in_flight = rng.randint(0, 3)
            replica.routed = rng.randint(0, 5)
        candidates = sorted(rng.sample(replicas, rng.randint(1, 3)), key=lambda r: r.index)
        facts = RequestFacts(api="openai_chat", model="tiny", body=body)
        expected = _reference_choice(policy, facts, candidates, now[0])
        got = policy.choose(facts, candidates)
        assert (got.replica.index, got.reason, got.depth, got.best_tokens,
                got.tokens) == expected, step  # fmt: skip
        reasons.add(got.reason)
    assert reasons >= {"kv_events", "affinity", "new_prefix", "overloaded"}
