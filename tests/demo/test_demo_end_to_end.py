"""`promptcache demo`, shortened, end to end on the real tinystories checkpoint (``--model``;
the default model, SmolLM2-135M-Instruct, is run by ``test_demo_smollm2.py``).

Runs the real command in a subprocess (engine server, two proxies, openai client, linter,
reports), then checks its claims against the engine's own usage numbers and the proxies' logs,
and that no server it started outlives it: after a normal end, after Ctrl-C, after SIGTERM and
after SIGKILL of the demo itself.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from contextlib import closing
from decimal import Decimal
from pathlib import Path

import pytest
from browser_support import Chromium, assert_report_drawn

from promptcache.formatting import percent

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / ".." / "shared" / "models" / "tinystories-656k"
CLI = "from promptcache.cli import main; main()"


def demo_command(out: Path, users: int, requests: int) -> list[str]:
    """The demo on tinystories-656k (the fast tests' model), answers of up to 16 tokens."""
    assert (MODEL / "config.json").is_file(), f"test checkpoint missing: {MODEL}"
    return [
        sys.executable, "-c", CLI, "demo", "--model", str(MODEL), "--users", str(users),
        "--requests-per-user", str(requests), "--output-dir", str(out), "--max-tokens", "16",
    ]  # fmt: skip


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], timeout_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def expected_lint_lines() -> dict[str, int]:
    """Lines in examples/naive_app.py: where ``build_system_prompt`` gives birth to ``now``
    and ``request_id``, and where its result enters the system message of the request (the
    call inside ``{"role": "system", "content": ...}``, the line each finding points at)."""
    tree = ast.parse((ROOT / "examples" / "naive_app.py").read_text())
    func = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "build_system_prompt"
    )
    lines: dict[str, int] = {}
    for node in func.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            lines[node.targets[0].id] = node.lineno
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "build_system_prompt"
        ):
            lines["enters_prompt"] = node.lineno
    return lines


@pytest.fixture(scope="module")
def demo_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("demo")
    proc = subprocess.run(
        demo_command(out, users=3, requests=8),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return out, proc


def test_demo_succeeds_and_stops_its_servers(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    pids = json.loads((out / "processes.json").read_text())
    assert set(pids) == {"engine", "proxy-naive", "proxy-layered"}
    assert wait_gone(list(pids.values()), timeout_s=1.0) == []


def test_hit_rates_come_from_the_engines_usage(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    for name, variant in summary["variants"].items():
        assert variant["requests"] == 3 * 8
        # The proxy logged the engine's own usage; the demo's totals must equal it.
        with sqlite3.connect(out / f"{name}.db") as conn:
            rows, total, read = conn.execute(
                "SELECT count(*), sum(total_input_tokens), sum(cache_read_tokens) FROM requests"
            ).fetchone()
        assert (rows, total, read) == (
            variant["requests"],
            variant["prompt_tokens"],
            variant["cached_tokens"],
        )
        assert variant["hit_rate"] == pytest.approx(read / total)
        # The proxies ran with --price-as gpt-5 (the demo's default): every row is priced at
        # gpt-5's rates, and the demo's money (client-side usage) equals the proxy's.
        with sqlite3.connect(out / f"{name}.db") as conn:
            priced = conn.execute(
                "SELECT priced_as, cost_usd, cost_without_cache_usd FROM requests"
            )
            rows_priced = priced.fetchall()
        assert {p for p, _, _ in rows_priced} == {variant["price_model"]} == {"gpt-5"}
        assert sum(Decimal(c) for _, c, _ in rows_priced) == Decimal(variant["cost_usd"])
        without = sum(Decimal(w) for _, _, w in rows_priced)
        assert without == Decimal(variant["cost_without_cache_usd"])
        html = (out / f"report-{name}.html").read_text()
        assert "priced at gpt-5&#39;s rates" in html
    assert summary["variants"]["layered"]["hit_rate"] > 0.6
    assert summary["variants"]["naive"]["hit_rate"] < 0.1
    naive, layered = summary["variants"]["naive"], summary["variants"]["layered"]
    assert float(layered["cost_usd"]) < float(layered["cost_without_cache_usd"])
    assert float(layered["cost_usd"]) < float(naive["cost_usd"])


def test_report_names_the_system_prompt_as_the_break(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    naive = json.loads((out / "summary.json").read_text())["variants"]["naive"]
    top = naive["breaks"][0]
    # messages[0] is the system message of the OpenAI chat request: where the timestamp lives.
    assert top["reason"] == "system_changed"
    assert top["segment"].startswith("messages[0]")
    assert top["requests"] >= naive["requests"] - 2
    excerpts = "".join(e["excerpt"] or "" for e in top["examples"])
    assert "Current time: " in excerpts or "Request id: " in excerpts
    html = (out / "report-naive.html").read_text()
    assert "system_changed" in html and "messages[0]" in html
    assert "Why the naive app's cache broke" in proc.stdout
    assert "system_changed in messages[0]" in proc.stdout


def test_each_log_file_alone_holds_every_row(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """The demo leaves no row behind in a ``-wal`` file: a copy of ``<variant>.db`` alone,
    read with plain sqlite3, sees every request of that variant."""
    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    for name, variant in summary["variants"].items():
        copy = tmp_path / f"{name}-alone.db"
        copy.write_bytes((out / f"{name}.db").read_bytes())  # without -wal and -shm
        conn = sqlite3.connect(copy)
        try:
            rows = conn.execute("SELECT count(*) FROM requests").fetchone()[0]
        finally:
            conn.close()
        assert rows == variant["requests"] == 3 * 8, name
        assert not (out / f"{name}.db-wal").exists() or (out / f"{name}.db-wal").stat().st_size == 0


def test_break_groups_add_up_to_the_requests_they_describe(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    for name, variant in summary["variants"].items():
        conn = sqlite3.connect(out / f"{name}.db")
        try:
            logged = dict(
                conn.execute(
                    "SELECT break_reason, COUNT(*) FROM requests WHERE break_reason IS NOT NULL "
                    "AND break_reason != 'new_prefix' GROUP BY 1"
                ).fetchall()
            )
        finally:
            conn.close()
        assert {b["reason"]: b["requests"] for b in variant["breaks"]} == logged, name
        for b in variant["breaks"]:
            shown = sum(e["requests"] for e in b["examples"])
            assert shown + b["other_requests"] == b["requests"], b
            for e in b["examples"]:
                n = e["requests"]
                what = e["kind"] or "the word"  # the changed value, named when recognised
                assert (
                    f"first difference in {what} at character {e['offset']} of the text "
                    f"({n} request{'s' if n != 1 else ''})" in proc.stdout
                )
            if b["other_requests"]:
                n = b["other_requests"]
                assert f"first difference elsewhere ({n} request" in proc.stdout
    assert "new_prefix" not in proc.stdout  # the first request of a prefix is not a break


def test_one_definition_of_a_hit_in_the_terminal_summary_and_reports(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    from promptcache.proxy.report import HIT_DEFINITION, build_report

    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    hits = {}
    for name, variant in summary["variants"].items():
        conn = sqlite3.connect(out / f"{name}.db")
        try:
            n, ttft_hits = conn.execute(
                "SELECT SUM(cache_read_tokens > 0), SUM(cache_read_tokens > 0 AND ttft_ms "
                "IS NOT NULL) FROM requests"
            ).fetchone()
        finally:
            conn.close()
        assert variant["hit_requests"] == n == ttft_hits, name
        assert variant["hit_definition"] == HIT_DEFINITION
        now = time.time()
        report = build_report(out / f"{name}.db", since=now - 86400, until=now + 1, now=now)
        assert report.total.hit_requests == n
        assert json.loads(json.dumps(report.to_dict()))["hit_definition"] == HIT_DEFINITION
        assert {t.hit: t.requests for t in report.ttft}.get(True, 0) == n
        html = (out / f"report-{name}.html").read_text()
        assert (
            f"<th>Requests with a cache hit (read &gt;= 1 cached token)</th>"
            f'<td class="n">{n:,}</td>' in html
        )
        hits[name] = n
    row = next(line for line in proc.stdout.splitlines() if "requests with a cache hit" in line)
    cells = [c.strip() for c in row.split("│")]
    assert cells[-3:-1] == [str(hits["naive"]), str(hits["layered"])]
    assert f"A cache hit is {HIT_DEFINITION}, however little it read" in " ".join(
        proc.stdout.split()
    )


def _requests(out: Path) -> dict[str, list[dict]]:
    by_variant: dict[str, list[dict]] = {}
    for line in (out / "requests.jsonl").read_text().splitlines():
        row = json.loads(line)
        by_variant.setdefault(row["variant"], []).append(row)
    return by_variant


def _table_cells(stdout: str, label: str) -> list[str]:
    row = next(line for line in stdout.splitlines() if line.startswith(f"│ {label} "))
    return [c.strip() for c in row.split("│")][-3:-1]


def test_printed_ttft_and_tokens_match_an_independent_count(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """Each request the client measured is one row the proxy logged from the engine's usage
    (same token counts); the medians printed in the table and in the sentence are the medians
    of those requests, hits and misses split by the logged cache reads; the sentence's verdict
    follows the order of the two medians."""
    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    requests = _requests(out)
    medians = {}
    for name, variant in summary["variants"].items():
        client = requests[name]
        with sqlite3.connect(out / f"{name}.db") as conn:
            logged = conn.execute(
                "SELECT total_input_tokens, cache_read_tokens, output_tokens FROM requests"
            ).fetchall()
        mine = [(r["prompt_tokens"], r["cached_tokens"], r["output_tokens"]) for r in client]
        assert sorted(mine) == sorted(logged), name
        hits = [r["ttft_ms"] for r in client if r["cached_tokens"] > 0]
        assert len(hits) == sum(1 for _, read, _ in logged if read > 0) == variant["hit_requests"]
        # TTFT split by the share of the prompt read from the cache: at least half, or less
        mostly = [r["ttft_ms"] for r in client if r["cached_tokens"] * 2 >= r["prompt_tokens"]]
        rest = [r["ttft_ms"] for r in client if r["cached_tokens"] * 2 < r["prompt_tokens"]]
        everything = statistics.median(r["ttft_ms"] for r in client)
        assert variant["ttft_p50_ms"] == pytest.approx(everything)
        medians[name] = round(everything)
        column = 0 if name == "naive" else 1
        shown = _table_cells(proc.stdout, "TTFT p50, all requests")[column]
        assert shown == f"{everything:,.0f} ms ({len(client)} req.)"
        shown = _table_cells(proc.stdout, "TTFT p50, >= half the prompt from cache")[column]
        assert shown == (f"{statistics.median(mostly):,.0f} ms ({len(mostly)} req.)" if mostly
                         else "n/a (none)")  # fmt: skip
        shown = _table_cells(proc.stdout, "TTFT p50, < half from cache (or none)")[column]
        assert shown == (f"{statistics.median(rest):,.0f} ms ({len(rest)} req.)" if rest
                         else "n/a (none)")  # fmt: skip
        shares = [r["cached_tokens"] / r["prompt_tokens"] for r in client if r["cached_tokens"]]
        shown = _table_cells(proc.stdout, "  share of its prompt a hit read, median")[column]
        assert shown == (percent(statistics.median(shares)) if shares else "n/a")
    text = " ".join(proc.stdout.split())
    naive, layered = summary["variants"]["naive"], summary["variants"]["layered"]
    assert (
        f"{medians['layered']:,} ms for the layered app, which read {percent(layered['hit_rate'])} "
        f"of its prompt tokens from the cache, vs {medians['naive']:,} ms for the naive app, "
        f"which read {percent(naive['hit_rate'])}"
    ) in text
    assert layered["hit_rate"] > naive["hit_rate"]
    if medians["layered"] < medians["naive"]:
        assert "which read more from the cache, got its first tokens" in text
        assert "sooner" in text and "later, by" not in text
    elif medians["layered"] > medians["naive"]:
        gap = medians["layered"] - medians["naive"]
        assert f"got its first tokens later, by {gap:,} ms" in text and "sooner" not in text
    else:
        assert "the two medians are equal" in text


def test_the_system_prompt_is_the_leading_sections_that_fit_the_context(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """tinystories has 512 positions: the demo sends the first sections of the instructions,
    says so, and no request of the run (prompt + answer, as the engine counted) exceeds them."""
    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    fit = summary["instructions"]
    assert fit["max_model_len"] == 512
    assert 1 <= fit["sections"] < fit["total_sections"]
    text = " ".join(proc.stdout.split())
    assert (
        f"system prompt: the first {fit['sections']} of {fit['total_sections']} sections of "
        f"examples/storytime_instructions.md, {fit['tokens']:,} tokens" in text
    )
    assert f"Both apps send the same instructions ({fit['tokens']:,} tokens)" in text
    for name in ("naive", "layered"):
        with sqlite3.connect(out / f"{name}.db") as conn:
            (longest,) = conn.execute(
                "SELECT max(total_input_tokens + output_tokens) FROM requests"
            ).fetchone()
        assert longest <= fit["longest_request_tokens"] <= 512, name
    # What the apps sent (the proxies stored the bodies): exactly those leading sections.
    from promptcache.demo.instructions import split_sections

    instructions = (ROOT / "examples" / "storytime_instructions.md").read_text()
    sent = "".join(split_sections(instructions)[: fit["sections"]]).rstrip("\n")
    for name in ("naive", "layered"):
        with sqlite3.connect(out / f"{name}.db") as conn:
            bodies = [json.loads(b) for (b,) in conn.execute("SELECT request_body FROM requests")]
        for body in bodies:
            system = body["messages"][0]["content"]
            assert (system == sent) if name == "layered" else (f".\n{sent}\nThe child" in system)


def test_lint_flags_the_naive_app_only(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    lines = expected_lint_lines()
    found = {(f["code"], f["line"], f["origin_line"]) for f in summary["variants"]["naive"]["lint"]}
    assert found == {
        ("PC001", lines["enters_prompt"], lines["now"]),
        ("PC002", lines["enters_prompt"], lines["request_id"]),
    }
    assert summary["variants"]["layered"]["lint"] == []


@pytest.mark.parametrize(
    ("signum", "inherited"),
    [
        (signal.SIGINT, signal.SIG_DFL),
        # a background job of a non-interactive shell (`make test &`, some CI runners) starts
        # with SIGINT ignored, and Python keeps it so: the demo used to hang on Ctrl-C there
        (signal.SIGINT, signal.SIG_IGN),
        (signal.SIGTERM, signal.SIG_DFL),
        (signal.SIGKILL, signal.SIG_DFL),
    ],
    ids=["ctrl-c", "ctrl-c-sigint-ignored-at-start", "sigterm", "sigkill"],
)
def test_no_server_outlives_an_interrupted_demo(
    tmp_path: Path, signum: int, inherited: signal.Handlers
) -> None:
    pids_file = tmp_path / "processes.json"
    with subprocess.Popen(
        demo_command(tmp_path, users=3, requests=200),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, inherited),
    ) as proc:
        try:
            deadline = time.monotonic() + 120
            while not pids_file.exists():
                assert proc.poll() is None, f"demo exited early: {proc.communicate()[1]}"
                assert time.monotonic() < deadline, "servers never became healthy"
                time.sleep(0.1)
            pids = list(json.loads(pids_file.read_text()).values())
            assert all(alive(p) for p in pids)
            time.sleep(1.0)  # let the workload start
            os.kill(proc.pid, signum)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode != 0
    if signum == signal.SIGINT:  # the shells' convention for Ctrl-C, not click's "Aborted!" (1)
        assert proc.returncode == 130 and stderr.strip().endswith("interrupted"), stderr
    assert wait_gone(pids) == [], f"children still alive after {signal.Signals(signum).name}"
    assert "Traceback" not in stderr


def test_the_demos_html_reports_draw_in_a_browser(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
    chromium: Chromium,
    tmp_path: Path,
) -> None:
    """The reports of a real demo log, in headless Chromium: every chart has more than one
    point although the whole run lasts seconds; the naive app's shows where its prompt broke."""
    out, proc = demo_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name, with_breaks in (("naive", True), ("layered", False)):
        result = chromium.measure_report(out, f"report-{name}.html")
        charts = assert_report_drawn(result, with_breaks=with_breaks)
        with closing(sqlite3.connect(out / f"{name}.db")) as conn:
            counts = "COUNT(*), SUM(break_reason IS NOT NULL AND break_reason != 'new_prefix')"
            requests, breaks = conn.execute(f"SELECT {counts} FROM requests").fetchone()
        drawn = charts["ttft"]["marks"]
        assert sum(m["value"] for m in drawn) == requests  # every demo request succeeded
        if with_breaks:
            assert sum(m["value"] for m in charts["breaks"]["marks"]) == breaks > 0
            assert sum(result["wide"]["divergences"]) == breaks
        shot = tmp_path / f"report-{name}-360.png"
        assert chromium.screenshot((out / f"report-{name}.html").as_uri(), shot, 360, 3000) == []
