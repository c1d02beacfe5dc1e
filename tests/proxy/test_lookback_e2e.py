"""Anthropic's 20-position lookback, end to end: official client -> proxy -> lookback mock.

The upstream (tests/proxy/lookback_upstream.py) caches by the documented rule on its own. Four
clients, each with its own API key (so each is its own prefix family), run through one proxy:

- ``naive``: a 40-request agent loop with tool calls and a single breakpoint on the last block.
  Most turns append an assistant text + tool call and its result (2 positions: the tool run
  counts once); request 26 answers 25 parallel tool calls (still 2 positions); requests 8, 14,
  20 and 31 also get 19, 18, 19 and 30 attached text blocks (21, 20, 21, 32 positions). So
  requests 8, 20 and 31 exceed the window (> 20) and 14 sits exactly on it (20: still read).
- ``sdk``: the same loop rendered by ``PromptBuilder`` + ``SlidingWindow``: never a miss.
- ``moved``: a breakpoint put back on an earlier block -> ``breakpoint_moved``.
- ``anchor``: a whitespace block inserted into, then removed from, an earlier message ->
  ``anchor_changed`` twice.

Every expected number is worked out here from the message lists and the mock's token rule
(words of each block's JSON), not read from the mock or the proxy.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import pytest
from lookback_upstream import LookbackUpstream, block_tokens, prompt_blocks
from prometheus_client.parser import text_string_to_metric_families
from proxy_support import FakeClock, RunningProxy, mock_config
from servers import ServerThread

from promptcache import PromptBuilder
from promptcache.lookback import SlidingWindow
from promptcache.proxy.app import build_app
from promptcache.proxy.report import build_report

T0 = 1_764_493_200.0  # an hour boundary
SONNET = "claude-sonnet-4-5"
# Sonnet 4.5 USD per million tokens (promptcache/data/prices.toml): input, read, write 5m
INPUT, READ, WRITE_5M = Decimal(3), Decimal("0.30"), Decimal("3.75")
KEYS = {
    name: f"sk-ant-api03-lookback-{name}-0123456789abcdef"
    for name in ("naive", "sdk", "moved", "anchor")
}
SYSTEM = "You are the build agent of Acme Anvils. Run the tools, then report briefly. " * 80
TASK = "Fix the failing build of the anvil service and tell me what was wrong."
TURNS = 40
ATTACHED = {8: 19, 14: 18, 20: 19, 31: 30}  # request -> text blocks attached to the tool result
PARALLEL = {26: 25}  # request -> parallel tool calls answered before it
EXCEEDED = [8, 20, 31]


def tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"Run {name} in the build sandbox and return its output.",
        "input_schema": {"type": "object", "properties": {"args": {"type": "string"}}},
    }


TOOLS = [tool("run_tests"), tool("read_file"), tool("grep")]


def appended(request: int) -> list[dict[str, Any]]:
    """The two messages the agent adds before ``request``: its tool call(s), their results."""
    calls = PARALLEL.get(request, 1)
    uses = [
        {
            "type": "tool_use",
            "id": f"toolu_{request}_{c}",
            "name": "grep",
            "input": {"args": f"-n err{c}"},
        }
        for c in range(calls)
    ]
    results = [
        {
            "type": "tool_result",
            "tool_use_id": f"toolu_{request}_{c}",
            "content": f"line {c}: error E{request}",
        }
        for c in range(calls)
    ]
    files = [
        {
            "type": "text",
            "text": f"attached file {request}.{k}: build log part {k} of turn {request}",
        }
        for k in range(ATTACHED.get(request, 0))
    ]
    return [
        {
            "role": "assistant",
            "content": [{"type": "text", "text": f"Step {request}: checking."}, *uses],
        },
        {"role": "user", "content": [*results, *files]},
    ]


def history(request: int) -> list[dict[str, Any]]:
    """Messages of ``request`` (1-based), without breakpoints."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": TASK}]}]
    for r in range(2, request + 1):
        messages.extend(appended(r))
    return messages


def naive_request(request: int) -> dict[str, Any]:
    messages = history(request)
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return {"tools": TOOLS, "system": [{"type": "text", "text": SYSTEM}], "messages": messages}


def total_tokens(params: dict[str, Any]) -> int:
    return sum(block_tokens(block) for block, _, _ in prompt_blocks(params))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    upstream = LookbackUpstream()
    clock = FakeClock(T0)
    db_path = tmp_path_factory.mktemp("lookback") / "log.db"
    with ServerThread(upstream) as mock:
        app = build_app(mock_config(mock.url, db_path, clock=clock))
        with ServerThread(app) as server:
            proxy = RunningProxy(server.url, db_path, app, server)
            sent: dict[str, list[dict[str, Any]]] = {name: [] for name in KEYS}
            clients = {
                name: anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0)
                for name, key in KEYS.items()
            }

            def send(name: str, params: dict[str, Any], stream: bool = False) -> None:
                clock.now += 5  # well inside the 5-minute TTL
                sent[name].append(copy.deepcopy(params))
                kwargs = {"model": SONNET, "max_tokens": 64, **params}
                if stream:
                    with clients[name].messages.stream(**kwargs) as events:
                        events.get_final_message()
                else:
                    clients[name].messages.create(**kwargs)

            for request in range(1, TURNS + 1):
                send("naive", naive_request(request), stream=request % 3 == 0)

            builder = PromptBuilder(model=SONNET).system(SYSTEM)
            for spec in TOOLS:
                builder.tool(spec["name"], spec["description"], spec["input_schema"])
            base = builder.dynamic(TASK).to_anthropic(max_tokens=64)
            window = SlidingWindow()
            notes = []
            for request in range(1, TURNS + 1):
                params = {k: v for k, v in base.items() if k not in ("model", "max_tokens")}
                params["messages"] = history(request)
                notes.append(window.apply(params, "anthropic", tail=True))
                send("sdk", params, stream=request % 4 == 0)

            for request in (3, 4):
                send("moved", naive_request(request))
            moved = naive_request(5)  # two more messages, breakpoint back on request 3's tail
            del moved["messages"][-1]["content"][-1]["cache_control"]
            moved["messages"][-5]["content"][-1]["cache_control"] = {"type": "ephemeral"}
            send("moved", moved)

            send("anchor", naive_request(4))
            with_anchor = naive_request(5)
            with_anchor["messages"][2]["content"].insert(1, {"type": "text", "text": " "})
            send("anchor", with_anchor)
            elsewhere = naive_request(6)  # it moved: gone from messages[2], now in messages[4]
            elsewhere["messages"][4]["content"].insert(1, {"type": "text", "text": " "})
            send("anchor", elsewhere)

            rows = proxy.rows(sum(len(v) for v in sent.values()))
            metrics = httpx.get(f"{server.url}/metrics").text
            for client in clients.values():
                client.close()
            yield {
                "rows": rows,
                "sent": sent,
                "log": upstream.cache.log,
                "notes": notes,
                "proxy": proxy,
                "metrics": metrics,
                "now": clock.now,
            }


def _by_client(run: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    rows = run["rows"]
    order = ["naive"] * TURNS + ["sdk"] * TURNS + ["moved"] * 3 + ["anchor"] * 3
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in KEYS}
    for name, row in zip(order, rows, strict=True):
        out[name].append(row)
    return out


def test_naive_agent_loop_misses_exactly_past_the_window(run: dict[str, Any]) -> None:
    rows = _by_client(run)["naive"]
    reasons = {i + 1: r["break_reason"] for i, r in enumerate(rows) if r["break_reason"]}
    assert reasons == {1: "new_prefix", **{t: "lookback_exceeded" for t in EXCEEDED}}
    sent = run["sent"]["naive"]
    log = run["log"][:TURNS]
    for t in range(2, TURNS + 1):
        read, _, _ = log[t - 1]
        previous_total = total_tokens(sent[t - 2])
        assert read == (0 if t in EXCEEDED else previous_total), t
    # the excerpt names the positions appended and the fix
    row = rows[7]
    assert row["break_excerpt"].startswith("21 block positions appended")
    assert "within 20 positions" in row["break_excerpt"]
    assert rows[30]["break_excerpt"].startswith("32 block positions appended")
    assert row["break_segment"] == "messages[14].content[19]"
    assert all(r["unexpected_miss"] == 0 for r in rows)


def test_sdk_rendered_loop_never_misses(run: dict[str, Any]) -> None:
    rows = _by_client(run)["sdk"]
    assert rows[0]["break_reason"] == "new_prefix"
    assert [r["break_reason"] for r in rows[1:]] == [None] * (TURNS - 1)
    assert all(r["cache_read_tokens"] > 0 for r in rows[1:])
    sent = run["sent"]["sdk"]
    for t in range(2, TURNS + 1):
        read, _, _ = run["log"][TURNS + t - 1]
        assert read == total_tokens(sent[t - 2]), t  # the whole previous prefix was read
    slid = [i + 1 for i, note in enumerate(run["notes"]) if note.path is not None]
    assert slid == [8, 14, 20, 31]  # where the tail ran past 15 positions
    note = run["notes"][7]
    assert "21 block positions after" in note.why and "reads it" in note.why
    assert all(len(_marks(p)) <= 4 for p in sent)


def _marks(params: dict[str, Any]) -> list[Any]:
    return [b for b, _, marked in prompt_blocks(params) if marked]


def test_moved_breakpoint_and_anchor_get_their_reasons(run: dict[str, Any]) -> None:
    by = _by_client(run)
    assert [r["break_reason"] for r in by["moved"]] == ["new_prefix", None, "breakpoint_moved"]
    assert "moved 2 block positions earlier" in by["moved"][2]["break_excerpt"]
    assert [r["break_reason"] for r in by["anchor"]] == [
        "new_prefix",
        "anchor_changed",
        "anchor_changed",
    ]
    assert by["anchor"][1]["break_segment"].startswith("messages[2]")


def expected_losses(run: dict[str, Any]) -> dict[str, tuple[int, Decimal]]:
    """Tokens and USD lost per reason, from the messages sent and the mock's token rule."""
    sent = run["sent"]
    million = Decimal(1_000_000)
    # lookback: the whole previous prefix was prefilled again, paid as a 5m write
    lookback = sum(total_tokens(sent["naive"][t - 2]) for t in EXCEEDED)
    # moved: it read request 3's prefix and could have read request 4's; no write
    m3, m4 = total_tokens(sent["moved"][0]), total_tokens(sent["moved"][1])
    # anchor: both compared with the first request (the longest shared prefix); nothing read,
    # its whole prefix written again each time
    a4 = total_tokens(sent["anchor"][0])
    return {
        "lookback_exceeded": (lookback, lookback * (WRITE_5M - READ) / million),
        "breakpoint_moved": (m4 - m3, (m4 - m3) * (INPUT - READ) / million),
        "anchor_changed": (2 * a4, 2 * a4 * (WRITE_5M - READ) / million),
    }


def test_report_lost_tokens_and_dollars_match_the_mock(run: dict[str, Any]) -> None:
    report = build_report(run["proxy"].db_path, since=T0, until=run["now"] + 1, now=run["now"])
    reasons = {b.reason: b for b in report.break_reasons}
    expected = expected_losses(run)
    assert set(reasons) == set(expected)
    for reason, (tokens, usd) in expected.items():
        assert reasons[reason].tokens_lost == tokens, reason
        assert reasons[reason].usd_lost == pytest.approx(float(usd)), reason
    assert reasons["lookback_exceeded"].breaks == 3
    assert reasons["anchor_changed"].breaks == 2
    assert reasons["breakpoint_moved"].breaks == 1


def test_metrics_count_losses_by_reason(run: dict[str, Any]) -> None:
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(run["metrics"])
        for s in family.samples
    }
    labels = {("vendor", "anthropic"), ("model", SONNET)}
    for reason, (tokens, usd) in expected_losses(run).items():
        key = frozenset({*labels, ("reason", reason)})
        assert samples["promptcache_cache_break_lost_tokens_total", key] == tokens
        assert samples["promptcache_cache_break_lost_usd_total", key] == pytest.approx(float(usd))
