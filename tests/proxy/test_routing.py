"""Routing over replicas: affinity, the load margin, health, retries, the log and /metrics.

Real processes on loopback: mock OpenAI-compatible replicas (fleet.py) under uvicorn and the
proxy under uvicorn, driven with the official openai client and httpx.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fleet import CACHED_TOKENS, PROMPT_TOKENS, FleetReplica, chat, rows_of, send, wait_for
from servers import ServerThread

from promptcache.fingerprint import fingerprint_request
from promptcache.proxy.app import build_app
from promptcache.proxy.config import URL_UPSTREAM_NAME, config_for_upstream, upstream_from_spec
from promptcache.proxy.routing.chunks import chunked_prompt


def test_same_prefix_goes_to_the_same_replica_and_a_new_prefix_to_the_least_loaded(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
    for tenant in ("A", "B", "C"):  # each new prefix goes to a replica no one used yet
        client.chat.completions.create(**chat(f"tenant {tenant}", "hi"))
    # the second turn of each session (its first turn, the reply, a new question) follows it
    for tenant in ("C", "A", "B"):
        client.chat.completions.create(**chat(f"tenant {tenant}", "hi", "ok", "more"))
    rows = rows_of(db, app, 6)
    served = {r.url: r.received for r in fleet}
    assert sorted(map(sorted, served.values())) == [
        ["tenant A", "tenant A"], ["tenant B", "tenant B"], ["tenant C", "tenant C"],
    ]  # fmt: skip
    by_tenant = {}
    for row in rows[:3]:
        assert (row["route_reason"], row["route_depth"], row["route_policy"]) == (
            "new_prefix", 0, "prefix",
        )  # fmt: skip
        by_tenant[row["replica"]] = row
    for row in rows[3:]:
        # system + user matched: 2 chunks (each message is shorter than one chunk)
        assert (row["route_reason"], row["route_depth"]) == ("prefix", 2)
        assert row["replica"] in by_tenant
        assert row["route_attempts"] == 1 and row["upstream"] == "fleet"
    # the engine-reported usage lands on each row: every second turn read the cache
    assert [r["cache_read_tokens"] for r in rows] == [0, 0, 0] + [CACHED_TOKENS] * 3


def test_load_margin_sends_a_matching_request_to_the_least_loaded_replica(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet[:2], load_margin=1)
    first = fleet[0]
    send(url, chat("tenant A", "warm up"))  # tenant A lives on replica 0 now
    assert first.received == ["tenant A"]
    first.hold()
    results: list[httpx.Response] = []
    threads = []
    for i in range(3):
        thread = threading.Thread(target=lambda: results.append(send(url, chat("tenant A", "q"))))
        thread.start()
        threads.append(thread)
        # wait until this one is in flight before the next arrives, so each sees the last
        wait_for(lambda n=2 + i: len(fleet[0].received) + len(fleet[1].received) == n, "arrival")
    first.release()
    for thread in threads:
        thread.join(30)
    assert [r.status_code for r in results] == [200] * 3
    rows = rows_of(db, app, 4)
    # 1 then 2 in flight on replica 0 vs 0 on replica 1: the third is over the margin of 1
    reasons = sorted((r["route_reason"], r["route_in_flight"], r["route_least_in_flight"])
                     for r in rows[1:])  # fmt: skip
    assert reasons == [("overloaded", 0, 0), ("prefix", 0, 0), ("prefix", 1, 0)]
    assert len(fleet[0].received) == 3 and fleet[1].received == ["tenant A"]


def test_the_load_margin_counts_from_the_other_replicas_mean_not_from_the_idlest_one(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet, load_margin=1)
    send(url, chat("tenant A", "warm up"))  # tenant A lives on replica 0, B on replica 1
    send(url, chat("tenant B", "warm up"))
    assert [r.received for r in fleet] == [["tenant A"], ["tenant B"], []]
    fleet[0].hold()
    fleet[1].hold()
    results: list[httpx.Response] = []
    threads = []

    def arrive(tenant: str, n: int) -> None:
        thread = threading.Thread(target=lambda: results.append(send(url, chat(tenant, "q"))))
        thread.start()
        threads.append(thread)
        # wait until it reached a replica before the next arrives, so each sees the last
        wait_for(lambda: sum(len(r.received) for r in fleet) == n, "arrival")

    arrive("tenant B", 3)  # replica 1: 2 in flight
    arrive("tenant B", 4)
    for n in (5, 6, 7):  # replica 0: 0, 1, then 2 in flight when they arrive
        arrive("tenant A", n)
    # The third had replica 0 at 2 in flight, 2 above the idle replica 2 but 1 above the
    # others' mean (2 and 0): within its share, it stayed with its prefix. The fourth finds
    # replica 0 at 3, 2 above that mean and more than twice it: over its share, it goes to
    # the least loaded.
    arrive("tenant A", 8)
    assert [len(r.received) for r in fleet] == [4, 3, 1] and fleet[2].received == ["tenant A"]
    fleet[0].release()
    fleet[1].release()
    for thread in threads:
        thread.join(30)
    assert [r.status_code for r in results] == [200] * 6
    rows = rows_of(db, app, 8)
    routed = sorted((r["route_in_flight"], r["route_reason"], r["replica"]) for r in rows[2:])
    # both sides sorted: the replicas' URLs order by their ports, which the OS picks
    assert routed == sorted([
        (0, "overloaded", fleet[2].url), (0, "prefix", fleet[0].url),
        (0, "prefix", fleet[1].url), (1, "prefix", fleet[0].url), (1, "prefix", fleet[1].url),
        (2, "prefix", fleet[0].url),
    ])  # fmt: skip


def test_a_request_the_load_margin_sent_elsewhere_leaves_its_prefix_at_home(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet[:2], load_margin=1)
    home, other = fleet[0], fleet[1]
    send(url, chat("tenant A", "warm up"))
    home.hold()
    results: list[httpx.Response] = []
    threads = []
    for i in range(3):  # the third is over the margin: replica 1 serves tenant A once
        thread = threading.Thread(target=lambda: results.append(send(url, chat("tenant A", "q"))))
        thread.start()
        threads.append(thread)
        wait_for(lambda n=2 + i: len(home.received) + len(other.received) == n, "arrival")
    home.release()
    for thread in threads:
        thread.join(30)
    assert other.received == ["tenant A"]
    # Both replicas now hold tenant A's prefix to the same depth, and neither is over the
    # margin: its requests go back to the replica that held it first, though replica 1 has
    # been sent fewer requests; one overloaded request does not split the tenant over two.
    for _ in range(3):
        assert send(url, chat("tenant A", "q")).status_code == 200
    assert len(home.received) == 6 and other.received == ["tenant A"]
    rows = rows_of(db, app, 7)
    assert [(r["replica"], r["route_reason"]) for r in rows[4:]] == [(home.url, "prefix")] * 3
    assert [r["cache_read_tokens"] for r in rows[4:]] == [CACHED_TOKENS] * 3
    assert [r["route_best_tokens"] == r["route_chosen_tokens"] for r in rows[4:]] == [True] * 3


def test_a_failing_health_check_takes_a_replica_out_until_it_passes_again(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, _, app = start_fleet_proxy(fleet[:2], health_interval_s=0.05)
    router = app.state.proxy.routers["fleet"]
    fleet[1].health_status = 503
    wait_for(lambda: not router.replicas[1].healthy, "replica 1 leaving the rotation")
    metrics = httpx.get(f"{url}/metrics").text
    assert f'promptcache_replica_healthy{{replica="{fleet[1].url}",upstream="fleet"}} 0.0' in (
        metrics
    )
    for tenant in "ABCD":  # new prefixes would spread over both; all go to the healthy one
        assert send(url, chat(tenant, "hi")).status_code == 200
    assert len(fleet[0].received) == 4 and fleet[1].received == []
    fleet[1].health_status = 200
    wait_for(lambda: router.replicas[1].healthy, "replica 1 rejoining")
    assert send(url, chat("E", "hi")).status_code == 200  # least loaded: fewest routed
    assert fleet[1].received == ["E"]


def test_a_health_path_the_replicas_lack_says_how_to_set_it_and_routing_goes_on(
    fleet: list[FleetReplica],
    start_fleet_proxy: Callable[..., tuple[str, Path, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a server without /health (404) left the rotation with only "answered HTTP 404": nothing
    # said the path is configurable, and the whole fleet was 'unhealthy' on /metrics
    url, db, app = start_fleet_proxy(fleet[:2], health_interval_s=0.05)
    router = app.state.proxy.routers["fleet"]
    with caplog.at_level(logging.WARNING):
        for replica in fleet[:2]:
            replica.health_status = 404
        wait_for(lambda: not any(r.healthy for r in router.replicas), "both leaving the rotation")
    lines = [r.getMessage() for r in caplog.records if "out of rotation" in r.getMessage()]
    assert len(lines) == 2 and all(
        "health check answered HTTP 404 to GET /health; if the server has no such path, set "
        "health_path in its [upstreams.NAME] table of a --config file" in line
        for line in lines
    ), lines
    # none in rotation: the policy still chooses among all, a prefix goes back where it was
    for question in ("1", "2", "3"):
        assert send(url, chat("A", question)).status_code == 200
    rows = rows_of(db, app, 3)
    assert [r["route_reason"] for r in rows] == ["new_prefix", "prefix", "prefix"]
    assert len({r["replica"] for r in rows}) == 1


def test_a_refused_connection_is_retried_once_on_another_replica(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet[:2], health_interval_s=1.5)
    router = app.state.proxy.routers["fleet"]
    send(url, chat("tenant A", "hi"))
    send(url, chat("tenant B", "hi"))
    assert fleet[1].received == ["tenant B"]
    checks = fleet[1].health_checks
    wait_for(lambda: fleet[1].health_checks > checks, "a health check")
    fleet[1].stop()  # refuses connections from now on; the next check is 1.5 s away
    response = send(url, chat("tenant B", "again"))
    assert response.status_code == 200 and response.json()["choices"][0]["message"]
    assert fleet[0].received == ["tenant A", "tenant B"]
    row = rows_of(db, app, 3)[-1]
    assert (row["replica"], row["route_reason"], row["route_attempts"]) == (
        fleet[0].url, "retry", 2,
    )  # fmt: skip
    assert row["status"] == 200 and row["error"] is None
    assert not router.replicas[1].healthy
    fleet[1].start()  # back on the same port: the health check returns it to rotation
    wait_for(lambda: router.replicas[1].healthy, "replica 1 rejoining")
    assert router.retries == 1
    metrics = httpx.get(f"{url}/metrics").text
    assert (
        f'promptcache_route_fallbacks_total{{kind="retry",replica="{fleet[0].url}",'
        'upstream="fleet"} 1.0'
    ) in metrics


def test_when_every_replica_refuses_the_client_gets_one_502_after_one_retry(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet)
    for replica in fleet:
        replica.stop()
    response = send(url, chat("tenant A", "hi"))
    assert response.status_code == 502
    message = response.json()["error"]["message"]
    row = rows_of(db, app, 1)[0]
    assert row["route_attempts"] == 2 and row["status"] == 502
    # the message names both replicas tried, in order (the row's replica is the last), and why
    assert message.startswith("all 2 replicas tried failed: 1. upstream fleet (http://")
    named = [r.url for r in fleet if r.url in message]
    assert len(named) == 2 and message.index(row["replica"]) == max(map(message.index, named))
    assert message.count("refused the connection") == 2 and row["error"] == message


def test_a_prefix_sent_to_replicas_that_refused_it_is_not_held_there_when_they_return(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    # with every replica out of rotation the choice still noted the prefix on the replicas
    # that refused it, so once they were back it was routed as held ('prefix', its tokens as
    # available) to a replica that had never seen it, and its cache read 0
    url, db, app = start_fleet_proxy(fleet[:2], health_interval_s=0.05)
    router = app.state.proxy.routers["fleet"]
    for replica in fleet[:2]:
        replica.stop()
    wait_for(lambda: not any(r.healthy for r in router.replicas), "both out of rotation")
    assert send(url, chat("tenant A", "hi")).status_code == 502  # both refuse it
    for replica in fleet[:2]:
        replica.start()
    wait_for(lambda: all(r.healthy for r in router.replicas), "both back in rotation")
    assert send(url, chat("tenant A", "hi")).status_code == 200
    row = rows_of(db, app, 2)[-1]
    assert (row["route_reason"], row["route_depth"], row["route_best_tokens"]) == (
        "new_prefix", 0, 0,
    )  # fmt: skip
    assert row["cache_read_tokens"] == 0  # what the replica then held, as the row now says
    assert [r.received for r in fleet[:2]].count(["tenant A"]) == 1


def test_a_502_after_a_retry_names_each_replica_tried_with_its_own_failure(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet[:2])
    # the proxy's first health round must have reached both replicas: a check that found the
    # first one stopped would take it out of rotation, and the retry would go the other way
    wait_for(lambda: all(r.health_checks for r in fleet[:2]), "the first health round")
    fleet[0].stop()  # the first choice (least loaded, first in list) refuses
    fleet[1].cut_before_body = True  # the retry's replica sends its head, then dies
    response = send(url, chat("tenant A", "hi", stream=True))
    assert response.status_code == 502
    message = response.json()["error"]["message"]
    first, second = message.removeprefix("all 2 replicas tried failed: ").split("; 2. ")
    assert first.startswith(f"1. upstream fleet ({fleet[0].url}) refused the connection")
    assert second.startswith(
        f"upstream fleet ({fleet[1].url}) dropped the connection: closed before the end of the "
        "response body"
    )
    assert second.endswith("(before any byte)")
    row = rows_of(db, app, 1)[0]
    assert (row["replica"], row["route_attempts"], row["error"]) == (fleet[1].url, 2, message)


def test_a_retried_request_counts_once_in_the_metrics_as_its_row_does(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet[:2])
    for replica in fleet[:2]:
        replica.stop()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
    for question in ("hi", "again"):  # a new prefix, then the same one
        try:
            client.chat.completions.create(**chat("tenant A", question))
        except openai.InternalServerError as exc:
            assert exc.status_code == 502
        else:
            raise AssertionError("every replica refuses: expected a 502")
    rows = rows_of(db, app, 2)
    assert [(r["route_reason"], r["route_attempts"]) for r in rows] == [("retry", 2)] * 2
    counted: dict[tuple[str, str], float] = {}
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("promptcache_routed_total{"):
            labels, value = line.rsplit(" ", 1)
            reason = labels.split('reason="', 1)[1].split('"', 1)[0]
            replica = labels.split('replica="', 1)[1].split('"', 1)[0]
            counted[(replica, reason)] = counted.get((replica, reason), 0.0) + float(value)
    # each request once, on the replica its row names, with its row's reason; the replica
    # that refused first is not credited with a new_prefix or prefix routing
    expected: dict[tuple[str, str], float] = {}
    for r in rows:
        key = (r["replica"], r["route_reason"])
        expected[key] = expected.get(key, 0.0) + 1.0
    assert counted == expected
    metrics = httpx.get(f"{url}/metrics").text
    for replica in fleet[:2]:
        assert (
            f'promptcache_routed_by_prefix_total{{replica="{replica.url}",upstream="fleet"}} 0.0'
        ) in metrics


def test_a_stream_that_breaks_after_its_first_byte_is_never_retried(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet[:2])
    fleet[0].cut_after_first_chunk = True
    with httpx.stream(
        "POST", f"{url}/v1/chat/completions", json=chat("tenant A", "hi", stream=True), timeout=30
    ) as response:
        assert response.status_code == 200
        body = b"".join(response.iter_raw())
    # the client got the first chunk, then the proxy's error event at the event boundary
    assert body.count(b"data: ") == 2 and b'"content": "ok"' in body and b"error" in body
    row = rows_of(db, app, 1)[0]
    assert fleet[0].received == ["tenant A"] and fleet[1].received == []  # not sent again
    assert row["route_attempts"] == 1 and "mid-response" in row["error"]


def test_a_stream_that_breaks_before_its_first_body_byte_is_retried(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet[:2])
    fleet[0].cut_before_body = True  # sends 200 and its headers, then dies
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0)
    stream = client.chat.completions.create(**chat("tenant A", "hi", stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "ok"
    assert fleet[0].received == fleet[1].received == ["tenant A"]
    row = rows_of(db, app, 1)[0]
    assert (row["replica"], row["route_reason"], row["route_attempts"]) == (
        fleet[1].url, "retry", 2,
    )  # fmt: skip
    assert row["error"] is None and row["cache_read_tokens"] == 0


def test_metrics_count_in_flight_routed_by_prefix_and_overloaded_per_replica(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet[:2], load_margin=0)
    send(url, chat("A", "1"))
    send(url, chat("A", "2"))  # prefix
    fleet[0].hold()
    thread = threading.Thread(target=send, args=(url, chat("A", "3")))  # prefix, held
    thread.start()
    wait_for(lambda: len(fleet[0].received) == 3, "the held request")
    metrics = httpx.get(f"{url}/metrics").text
    r0, r1 = fleet[0].url, fleet[1].url
    assert f'promptcache_replica_in_flight{{replica="{r0}",upstream="fleet"}} 1.0' in metrics
    assert f'promptcache_replica_in_flight{{replica="{r1}",upstream="fleet"}} 0.0' in metrics
    send(url, chat("A", "4"))  # replica 0 is 1 over replica 1 > margin 0: overloaded
    fleet[0].release()
    thread.join(30)
    rows = rows_of(db, app, 4)  # routings count from the rows' records: wait for all four
    metrics = httpx.get(f"{url}/metrics").text
    assert f'promptcache_routed_by_prefix_total{{replica="{r0}",upstream="fleet"}} 2.0' in metrics
    # its HELP said 'Requests routed to the replica that held their longest prefix.', which a
    # kv_events fleet's scrape printed above its 0s, its requests routed to holders uncounted
    assert (
        "# HELP promptcache_routed_by_prefix_total Requests the prefix policy routed to the "
        "replica that held their longest prefix (route_reason prefix); a kv_events fleet counts "
        "its requests routed by the blocks a replica holds in "
        'promptcache_routed_total{reason="kv_events"}.\n'
    ) in metrics
    assert (
        f'promptcache_route_fallbacks_total{{kind="overloaded",replica="{r1}",upstream="fleet"}} '
        "1.0"
    ) in metrics
    assert sorted(r["route_reason"] for r in rows) == [
        "new_prefix", "overloaded", "prefix", "prefix",
    ]  # fmt: skip
    assert sum(r["total_input_tokens"] for r in rows) == 4 * PROMPT_TOKENS
    # the overloaded request's regret: all its matched prefix, on the replica it went to (the
    # hooks ran before the rows were queued, so the counters have every request now)
    metrics = httpx.get(f"{url}/metrics").text
    over = next(r for r in rows if r["route_reason"] == "overloaded")
    assert over["route_chosen_tokens"] == 0 and over["route_best_tokens"] > 0
    assert (
        f'promptcache_route_regret_tokens_total{{replica="{r1}",upstream="fleet"}} '
        f"{float(over['route_best_tokens'])}"
    ) in metrics
    # token-weighted fleet hit rate: the replicas' own counts of what they reported
    cached = sum(r.cached_tokens_sent for r in fleet[:2])
    prompt = sum(r.prompt_tokens_sent for r in fleet[:2])
    assert f'promptcache_fleet_hit_rate{{upstream="fleet"}} {cached / prompt}' in metrics


def test_every_series_a_fleet_proxy_exports_is_in_the_metrics_table_of_docs_report_md(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    """docs/report.md's Metrics table is where a reader looks a series up: each family the
    proxy's /metrics declares (prometheus_client's ``_created`` timestamps aside) is listed."""
    url, db, app = start_fleet_proxy(fleet[:2])
    send(url, chat("A", "1"))
    rows_of(db, app, 1)
    names = {
        line.split()[2]
        for line in httpx.get(f"{url}/metrics").text.splitlines()
        if line.startswith("# TYPE ") and not line.split()[2].endswith("_created")
    }
    assert "promptcache_route_regret_tokens_total" in names  # the fleet's series are exported
    docs = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text()
    table = docs.split("\n## Metrics\n", 1)[1].split("```promql", 1)[0]
    assert sorted(n for n in names if f"`{n}`" not in table) == []


def test_a_routed_response_reaches_the_client_before_its_row_is_finished(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    # The row's bookkeeping (hooks, usage, the break explainer) runs after the last byte went
    # out: a hook that waits for the client to hold its whole response is never waited on by it.
    url, db, app = start_fleet_proxy(fleet[:2])
    client_has_it = [threading.Event(), threading.Event()]  # per request, in order
    waited: list[bool] = []

    def hook(record: Any) -> None:
        waited.append(client_has_it[len(waited)].wait(10))

    app.state.record_hooks.append(hook)
    for i, stream in enumerate((False, True)):
        with httpx.stream(
            "POST", f"{url}/v1/chat/completions", json=chat("A", "q", stream=stream), timeout=30
        ) as reply:
            body = reply.read()
        client_has_it[i].set()
        assert reply.status_code == 200 and body.endswith(b"}" if not stream else b"[DONE]\n\n")
    rows = rows_of(db, app, 2)
    assert waited == [True, True]
    for row in rows:
        assert row["error"] is None and row["replica"] == fleet[0].url
        assert row["total_input_tokens"] == PROMPT_TOKENS
        assert row["ended_at"] >= row["started_at"] and row["latency_ms"] > 0
    assert [r["route_reason"] for r in rows] == ["new_prefix", "prefix"]


def test_a_routed_stream_the_client_leaves_mid_way_still_gets_its_row(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet[:2])
    fleet[0].hang_after_first_chunk = True
    with httpx.stream(
        "POST", f"{url}/v1/chat/completions", json=chat("A", "q", stream=True), timeout=30
    ) as reply:
        first = next(reply.iter_raw())
        assert first.startswith(b"data: ")  # the first event, then the client goes away
    assert fleet[0].disconnected.wait(10), "the proxy kept the replica's stream open"
    (row,) = rows_of(db, app, 1)
    assert row["error"] == "client disconnected before the response was complete"
    assert (row["status"], row["stream"], row["replica"]) == (200, 1, fleet[0].url)
    assert row["route_reason"] == "new_prefix" and row["route_attempts"] == 1


def test_each_row_has_the_id_its_response_carried_and_its_key_fingerprint(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    # The id and the key fingerprint are filled in while the replica works on the request (or,
    # for a request refused before forwarding, before the refusal goes out).
    url, db, app = start_fleet_proxy(fleet[:2])
    endpoint = f"{url}/v1/chat/completions"
    replies = [
        httpx.post(endpoint, json=chat("A", "q"), headers={"authorization": "Bearer key-1"}),
        httpx.post(endpoint, json=chat("A", "q", stream=True), headers={"x-api-key": "key-1"}),
        httpx.post(endpoint, content=b"{not json", headers={"authorization": "Bearer key-2"}),
    ]
    assert [r.status_code for r in replies] == [200, 200, 400]
    rows = rows_of(db, app, 3)
    ids = [r.headers["x-promptcache-request-id"] for r in replies]
    assert [row["id"] for row in rows] == ids and len(set(ids)) == 3
    assert all(len(i) == 32 for i in ids)
    keys = [row["key_fingerprint"] for row in rows]
    assert keys[0] is not None and keys[0] == keys[1] != keys[2] is not None
    assert [row["replica"] for row in rows] == [fleet[0].url, fleet[0].url, None]


def test_a_policy_that_reads_no_prompt_still_logs_the_prefix_columns(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    # least_loaded does not read the fingerprint, so the proxy fingerprints the request for its
    # row after the response instead of before forwarding: the row's columns are the same.
    body = chat("tenant A", "hi", "ok", "more")
    rows = []
    for policy in ("prefix", "least_loaded"):
        url, db, app = start_fleet_proxy(fleet[:2], policy=policy)
        assert send(url, body).status_code == 200
        (row,) = rows_of(db, app, 1)
        assert row["route_policy"] == policy
        rows.append(row)
    columns = ("prefix_hash", "segment_hashes", "first_segment_hash", "approx_prefix_tokens")
    assert rows[0]["prefix_hash"] is not None and rows[0]["approx_prefix_tokens"] > 0
    assert [rows[1][c] for c in columns] == [rows[0][c] for c in columns]


def test_a_matched_requests_route_tokens_and_fingerprint_come_from_its_whole_prompt(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    # Before forwarding the proxy only cuts the prompt into chunks; the fingerprint and the
    # decision's tokens are computed afterwards. Both must be what the whole request gives.
    url, db, app = start_fleet_proxy(fleet[:2])
    document = "The quarterly report says revenue grew in every region but the north. " * 6
    first = chat(document, "How much did the north grow?")
    second = chat(document, "How much did the north grow?", "It did not.", "And the south?")
    send(url, first)
    send(url, second)
    rows = rows_of(db, app, 2)
    expected = fingerprint_request(second, "openai_chat")
    chunks = chunked_prompt(expected)
    row = rows[1]
    assert (row["route_reason"], row["replica"]) == ("prefix", rows[0]["replica"])
    shared = len(chunked_prompt(fingerprint_request(first, "openai_chat")).hashes)
    assert row["route_depth"] == shared < len(chunks.hashes)
    assert row["route_best_tokens"] == row["route_chosen_tokens"] == chunks.tokens_at(shared) > 0
    assert row["prefix_hash"] == expected.prefix_hash
    assert row["approx_prefix_tokens"] == expected.approx_prefix_tokens
    assert rows[0]["route_best_tokens"] == rows[0]["route_chosen_tokens"] == 0  # new prefix


def test_metrics_of_replicas_given_as_urls_name_the_replica_each_request_went_to(
    fleet: list[FleetReplica], tmp_path: Path
) -> None:
    # ``--upstream URL1,URL2``: the upstream's name is the log's ``custom``; each routed request
    # counts on the replica it went to (its row's ``replica``), not on the upstream as a whole.
    upstream = upstream_from_spec(f"{fleet[0].url},{fleet[1].url}")
    app = build_app(config_for_upstream(upstream, db_path=tmp_path / "urls.db",
                                        flush_interval_s=0.05))  # fmt: skip
    with ServerThread(app) as server:
        for tenant, turn in (("A", "1"), ("B", "1"), ("A", "2"), ("A", "3")):
            assert send(server.url, chat(f"tenant {tenant}", turn)).status_code == 200
        rows = rows_of(tmp_path / "urls.db", app, 4)
        metrics = httpx.get(f"{server.url}/metrics").text
    assert {r["upstream"] for r in rows} == {URL_UPSTREAM_NAME}
    assert sorted(r["replica"] for r in rows) == sorted([fleet[0].url] * 3 + [fleet[1].url])
    routed: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("promptcache_routed_total{"):
            labels, value = line.rsplit(" ", 1)
            assert f'upstream="{URL_UPSTREAM_NAME}"' in labels
            replica = labels.split('replica="', 1)[1].split('"', 1)[0]
            routed[replica] = routed.get(replica, 0.0) + float(value)
    assert routed == {fleet[0].url: 3.0, fleet[1].url: 1.0}
    assert (
        f'promptcache_routed_by_prefix_total{{replica="{fleet[0].url}",'
        f'upstream="{URL_UPSTREAM_NAME}"}} 2.0'
    ) in metrics
