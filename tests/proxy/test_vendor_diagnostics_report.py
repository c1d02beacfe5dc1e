"""The report's agreement table, checked against an independent count of the log's rows.

One log through a proxy with ``vendor_diagnostics`` on, in front of the mock vendor
(``diagnostics_vendor.py``), with the official clients: Anthropic turns the proxy names the
previous response for, turns where the client names one itself (a stateless app's new question,
another conversation's response), a vendor that cannot diagnose, and OpenAI Responses
requests that ask for a comparison. The test states each request's expected verdict; the
counts, the pairs and the examples of ``build_report``, ``promptcache report`` (text, JSON,
HTML) and the proxy's ``/report`` must match the rows read back with plain sqlite3.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
from click.testing import CliRunner
from diagnostics_vendor import (  # noqa: F401 (fixtures)
    VendorServer,
    diagnostics_vendor_fixture,
    start_diagnosing_proxy_fixture,
)
from proxy_support import RunningProxy

from promptcache.cli import cli
from promptcache.proxy.log_copy import copy_log
from promptcache.proxy.report import build_report

KEY = "sk-ant-api03-diagnostics-report-0123456789"
OPENAI_KEY = "sk-proj-diagnostics-report-0123456789abcdef"
SYSTEM = "You are the support agent of Acme Anvils. Answer briefly and cite the manual. " * 40


def system(suffix: str = "") -> list[dict[str, Any]]:
    return [{"type": "text", "text": SYSTEM + suffix, "cache_control": {"type": "ephemeral"}}]


def talk(*texts: str) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for i, t in enumerate(texts)
    ]


def traffic(proxy: RunningProxy) -> dict[str, str]:
    """Send the scenario; response id -> the verdict the test expects for it ("" for none).

    Each request waits for its predecessor's row: the proxy remembers a response (for the next
    request's previous_message_id, and for the explainer) once it has logged it, just after
    the client got its last byte."""
    expected: dict[str, str] = {}
    with anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client:

        def send(verdict: str, messages: Any, suffix: str = "", **extra: Any) -> str:
            rid = client.messages.create(
                model="claude-sonnet-4-5", max_tokens=16, system=system(suffix),
                messages=messages, **extra,
            ).id  # fmt: skip
            expected[rid] = verdict
            proxy.rows(len(expected))  # logged (and remembered) before the next request
            return rid

        a = ["Where is order 1234?", "ok", "When does it ship?", "ok", "To Bern?", "ok", "Thanks"]
        send("", talk(*a[:1]))  # first turn: null, nothing to compare
        send("agree", talk(*a[:3]))  # appended: no break, no divergence
        send("agree", talk(*a[:5]), " Today is Thursday.")  # system_changed on both sides
        send("inconclusive", talk(*a[:7]), " Today is Thursday.",
             extra_headers={"x-mock-diagnosis": "unavailable"})  # fmt: skip
        b1 = send("", talk("What does the A-100 weigh?"), " Today is Thursday.")
        # the client names responses itself (the proxy leaves its diagnostics alone):
        q1 = send("", talk("Is the A-300 in stock?"), " Today is Friday.",
                  diagnostics={"previous_message_id": None})  # fmt: skip
        send("disagree", talk("Do you ship to Oslo?"), " Today is Friday.",
             diagnostics={"previous_message_id": q1})  # fmt: skip  # a new question
        asked = talk("Is the A-300 in stock?", "ok", "And the A-400?")
        send("disagree", asked, " Today is Friday.",
             diagnostics={"previous_message_id": b1})  # fmt: skip  # another conversation's
    instructions = "You answer questions about Acme Anvils from the manual. " * 40
    tool = {"type": "function", "name": "get_time", "parameters": {"type": "object"}}
    with openai.OpenAI(base_url=proxy.url + "/v1", api_key=OPENAI_KEY, max_retries=0) as chat:

        def ask(verdict: str, tools: list[dict[str, Any]], compared: str | None) -> str:
            extra = {} if compared is None else {
                "prompt_cache_options": {"comparison_response_id": compared}}  # fmt: skip
            rid = chat.responses.create(
                model="gpt-5.6", instructions=instructions, input="Reply with exactly OK.",
                tools=tools, **extra,  # type: ignore[arg-type]
            ).id  # fmt: skip
            expected[rid] = verdict
            proxy.rows(len(expected))  # logged (and remembered) before the next request
            return rid

        first = ask("", [tool], None)
        hit = ask("agree", [tool], first)  # cache_hit, no break
        ask("agree", [{**tool, "name": "get_date"}], hit)  # tools_changed on both sides
        ask("inconclusive", [tool], "resp_unknown")  # comparison_response_not_found
    return expected


def independent_count(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The agreement figures computed from the rows in Python, without the report's SQL."""
    by_id = {r["id"]: r for r in rows}
    diagnosed = [r for r in rows if r["vendor_miss_reason"] is not None]
    same = 0
    for r in diagnosed:
        previous = by_id.get(r["previous_request_id"] or "")
        if previous is not None and previous["response_id"] == r["vendor_comparison_id"]:
            same += 1
    pairs = Counter((r["api"], r["break_reason"], r["vendor_miss_reason"]) for r in diagnosed)
    return {"requests": len(diagnosed), "same_previous": same, "pairs": pairs}


def test_agreement_table_matches_an_independent_count(
    start_diagnosing_proxy: Callable[..., RunningProxy], tmp_path: Path
) -> None:
    proxy = start_diagnosing_proxy(vendor_diagnostics=True, report_refresh_s=0)
    expected = traffic(proxy)
    rows = proxy.rows(len(expected))
    by_response = {r["response_id"]: r for r in rows}
    verdicts = Counter(v for v in expected.values() if v)
    assert verdicts == {"agree": 4, "disagree": 2, "inconclusive": 2}
    for rid, verdict in expected.items():  # a diagnosis exactly where one was expected
        assert (by_response[rid]["vendor_miss_reason"] is not None) == bool(verdict), rid
    counted = independent_count(rows)
    assert counted["requests"] == sum(verdicts.values()) == 8
    disagreeing = {by_response[rid]["id"] for rid, v in expected.items() if v == "disagree"}

    now = time.time()
    since, until = now - 3600, now + 60
    report = build_report(proxy.db_path, since=since, until=until, now=now)
    a = report.agreement
    assert a is not None
    assert (a.requests, a.agree, a.disagree, a.inconclusive) == (
        counted["requests"], verdicts["agree"], verdicts["disagree"], verdicts["inconclusive"],
    )  # fmt: skip
    assert a.same_previous == counted["same_previous"]
    # all but the request that named another conversation's response and the unknown one
    assert a.same_previous == 6
    assert {(r.api, r.ours, r.vendor): r.requests for r in a.rows} == dict(counted["pairs"])
    assert {e.request_id for e in a.examples} == disagreeing
    pairs = {(r.ours, r.vendor): r.verdict for r in a.rows if r.api == "anthropic"}
    assert pairs[(None, "no_divergence")] == "agree"
    assert pairs[("system_changed", "system_changed")] == "agree"
    assert pairs[(None, "messages_changed")] == "disagree"
    elsewhere = [
        e for e in a.examples
        if by_response[e.vendor_comparison_id or ""]["id"] != e.previous_request_id
    ]  # fmt: skip
    assert len(elsewhere) == 1 and elsewhere[0].vendor == "system_changed"

    window = ["--db", str(proxy.db_path), "--since", repr(since), "--until", repr(until)]
    text = CliRunner().invoke(cli, ["report", *window])
    assert text.exit_code == 0, text.output
    flat = " ".join(text.output.split())
    assert (
        f"{a.requests} request{'s' * (a.requests != 1)} with one, {a.agree} agree, "
        f"{a.disagree} disagree, "
        f"{a.inconclusive} inconclusive; {a.same_previous} compared with the same previous request"
    ) in flat
    for request_id in disagreeing:
        assert request_id in text.output

    data = json.loads(CliRunner().invoke(cli, ["report", *window, "--format", "json"]).output)
    assert data["agreement"]["requests"] == a.requests
    assert data["agreement"]["disagree"] == a.disagree

    out = tmp_path / "report.html"
    written = CliRunner().invoke(cli, ["report", *window, "--format", "html", "-o", str(out)])
    assert written.exit_code == 0, written.output
    live = httpx.get(proxy.url + "/report?window=1h", timeout=30)
    assert live.status_code == 200
    for page in (out.read_text(encoding="utf-8"), live.text):
        table = page.split('id="agreement"', 1)[1].split("</table>", 1)[0]
        assert Counter(re.findall(r'data-verdict="(\w+)"', table)) == Counter(
            r.verdict for r in a.rows
        )
        shown = page.split('id="agreement-examples"', 1)[1].split("</table>", 1)[0]
        assert set(re.findall(r'data-request-id="(\w+)"', shown)) == disagreeing


def test_the_agreement_table_of_a_postgres_log_equals_sqlite_s(
    start_diagnosing_proxy: Callable[..., RunningProxy], pg_url: str
) -> None:
    """The same rows copied into a real Postgres log (``promptcache log copy``) give the same
    table: its SQL is plain enough for both backends."""
    proxy = start_diagnosing_proxy(vendor_diagnostics=True)
    expected = traffic(proxy)
    proxy.rows(len(expected))
    proxy.server.stop()  # every row written
    copy_log(proxy.db_path, pg_url)
    now = time.time()
    on_sqlite = build_report(proxy.db_path, since=now - 3600, until=now + 60, now=now)
    on_postgres = build_report(pg_url, since=now - 3600, until=now + 60, now=now)
    assert on_sqlite.agreement is not None
    assert on_postgres.agreement == on_sqlite.agreement


def test_one_request_with_a_diagnosis_is_singular() -> None:
    from promptcache.proxy.report.agreement import Agreement
    from promptcache.proxy.report.render import agreement_line

    one = agreement_line(Agreement(1, 1, 0, 0, 0, (), ()))
    assert one.startswith(
        "Our break reasons against the vendors' own diagnoses: 1 request with one,"
    )
    assert (
        agreement_line(Agreement(1200, 1200, 0, 0, 0, (), ()))
        .split(": ")[1]
        .startswith("1,200 requests with one,")
    )
