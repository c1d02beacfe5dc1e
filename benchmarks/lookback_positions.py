"""Per-request cost of the lookback check the proxy's explainer runs on Anthropic requests.

A 40-turn agent request (a 1,600-word system prompt, 3 tools, per turn an assistant text +
tool call and its tool result; 83 segments) and its predecessor (39 turns). Medians over
``--repeats`` runs of ``--calls`` calls each, in this one process:

- baseline: ``fingerprint_request`` of the request (what the proxy already pays per request);
- ``check_lookback`` warm: every segment's block flags memoised by hash (the proxy's common
  case: the history repeats from one request to the next);
- ``check_lookback`` cold: the memo emptied before each call (every message segment parsed).

Usage::

    .venv/bin/python benchmarks/lookback_positions.py
    .venv/bin/python benchmarks/lookback_positions.py --repeats 9 --calls 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from promptcache import lookback
from promptcache.fingerprint import fingerprint_request


def agent_request(turns: int) -> dict[str, Any]:
    """An Anthropic agent-loop body with ``turns`` requests' worth of tool calls."""
    tools = [
        {
            "name": name,
            "description": f"Run {name} in the sandbox.",
            "input_schema": {"type": "object", "properties": {"args": {"type": "string"}}},
        }
        for name in ("run_tests", "read_file", "grep")
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing build."}]
    for t in range(2, turns + 1):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {t}: checking."},
                    {"type": "tool_use", "id": f"t{t}", "name": "grep", "input": {"args": "err"}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{t}", "content": "E1 " * 40}],
            }
        )
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    system = [{"type": "text", "text": "You are the build agent of Acme Anvils. " * 200}]
    return {"model": "claude-sonnet-4-5", "tools": tools, "system": system, "messages": messages}


def median_us(fn: Callable[[], Any], repeats: int, calls: int) -> float:
    """Median over ``repeats`` runs of the mean time of one ``fn()`` call, in microseconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    old_body, new_body = agent_request(39), agent_request(40)
    old = fingerprint_request(old_body, "anthropic")
    new = fingerprint_request(new_body, "anthropic")

    def cold() -> None:
        lookback._FLAGS_BY_SHA.clear()
        lookback.check_lookback(old, new)

    base = median_us(lambda: fingerprint_request(new_body, "anthropic"), args.repeats, args.calls)
    warm = median_us(lambda: lookback.check_lookback(old, new), args.repeats, args.calls)
    cold_us = median_us(cold, args.repeats, args.calls)
    chars = sum(s.num_chars for s in new.segments)
    print(f"request: {len(new.segments)} segments, {chars:,} chars")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print("| what | us per request | vs fingerprint |")
    print("|---|---|---|")
    for name, value in (
        ("fingerprint_request (baseline)", base),
        ("check_lookback, warm memo", warm),
        ("check_lookback, cold memo", cold_us),
    ):
        print(f"| {name} | {value:,.1f} | {value / base:.3f} |")


if __name__ == "__main__":
    main()
