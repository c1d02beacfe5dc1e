"""The demo's steps, in order: lint and check, start the servers, replay the workload twice,
report.

:func:`run_demo` is what ``promptcache demo`` calls. It prints progress and the final summary to
a rich ``Console`` and writes, under the output folder: ``summary.json`` (every number shown),
``naive.db`` and ``layered.db`` (the request logs of the two proxies, one per app),
``report-naive.html`` and ``report-layered.html`` (``promptcache report --format html`` of each
log), ``engine.log``, ``proxy-naive.log``, ``proxy-layered.log``, ``lint.txt``, ``check-naive.json``
and ``check-layered.json`` (``promptcache check``'s reports; the apps' output in
``check-*.txt``) and ``processes.json`` (pids of the servers while they run).
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

import httpx
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from promptcache.engine.tokenizer import Tokenizer
from promptcache.errors import ConfigError, DemoError, ModelLoadError
from promptcache.folders import folder_problem
from promptcache.formatting import percent, plural

from .check_step import check_apps
from .instructions import describe_instructions, fit_instructions
from .model import ModelChoice, resolve_model, serving_weight_dtype
from .processes import ChildProcesses, free_port
from .summary import (
    BreakSummary,
    LintFinding,
    VariantSummary,
    group_break_offsets,
    render_summary,
    summarize_variant,
)
from .workload import STORY_ARCS, RequestResult, UserPlan, plan_workload, run_variant

__all__ = ["CHAT_TEMPLATE", "DemoOptions", "DemoResult", "run_demo", "workload_line"]

#: Plain-text chat template for base models that ship none (tinystories-656k): one
#: ``role: content`` line per message, then ``assistant:`` for the answer.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ message['role'] }}: "
    "{{ message['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)
VARIANTS = (("naive", "naive_app.py"), ("layered", "layered_app.py"))
#: The product instructions both apps read (in ``examples/``).
INSTRUCTIONS_FILE = "storytime_instructions.md"
_CLI = "from promptcache.cli import main; main()"
#: Distinct change offsets shown per break reason.
BREAK_EXAMPLES = 2


@dataclass(frozen=True)
class DemoOptions:
    """What ``promptcache demo`` was asked for.

    Attributes:
        model: ``--model`` (path or Hub id) or None for the default search.
        users: concurrent simulated users (>= 1).
        requests_per_user: requests each user sends per variant (>= 1).
        output_dir: folder for the reports, logs and ``summary.json``.
        max_tokens: answer length limit per request, in tokens.
        price_model: model whose published rates price the token counts.
        weight_dtype: the engine's ``--weight-dtype``, or None for the model's own precision
            (``model.serving_weight_dtype``).
        startup_timeout_s: how long each server may take to become healthy.
    """

    model: str | None
    users: int = 3
    requests_per_user: int = 4
    output_dir: Path = Path("out") / "demo"
    max_tokens: int = 32
    price_model: str = "gpt-5"
    weight_dtype: str | None = None
    startup_timeout_s: float = 120.0


@dataclass(frozen=True)
class DemoResult:
    """Both variants' summaries, the model used, and the path of ``summary.json``."""

    model: ModelChoice
    naive: VariantSummary
    layered: VariantSummary
    summary_path: Path


def repo_root() -> Path:
    """The repository holding this package (the demo's apps live in its ``examples/``)."""
    return Path(__file__).resolve().parents[2]


def load_app(path: Path, name: str) -> ModuleType:
    """Import an example app from its file (``examples/`` is not a package)."""
    spec = importlib.util.spec_from_file_location(f"promptcache_demo_{name}_app", path)
    if spec is None or spec.loader is None:
        raise DemoError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# -- step 1: lint -------------------------------------------------------------------------------


def lint_apps(paths: dict[str, Path], output_dir: Path) -> dict[str, list[LintFinding]]:
    """Run ``promptcache lint --format json`` on the apps; findings per variant name.

    Raises:
        DemoError: the linter failed (exit status 2) or printed something that is not JSON.
    """
    args = [sys.executable, "-c", _CLI, "lint", "--format", "json", *map(str, paths.values())]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    (output_dir / "lint.txt").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode not in (0, 1):
        raise DemoError(f"`promptcache lint` failed (status {proc.returncode}): {proc.stderr}")
    try:
        items = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError as exc:
        raise DemoError(f"`promptcache lint --format json` printed no JSON: {exc}") from exc
    by_file = {Path(p).resolve(): name for name, p in paths.items()}
    found: dict[str, list[LintFinding]] = {name: [] for name in paths}
    for item in items:
        name = by_file.get(Path(item["filename"]).resolve())
        if name is None:
            continue
        related = item.get("related") or []
        found[name].append(
            LintFinding(
                path=_relative(paths[name]),
                line=int(item["location"]["row"]),
                code=str(item["code"]),
                message=str(item["message"]),
                origin_line=int(related[0]["row"]) if related else None,
            )
        )
    return found


# -- the model's tokenizer ----------------------------------------------------------------------


def load_tokenizer(model: ModelChoice, output_dir: Path) -> tuple[Tokenizer, Path | None]:
    """The served model's tokenizer, loaded as the engine loads it (to size the system prompt),
    and the chat-template file to give the engine when the checkpoint ships none: then
    :data:`CHAT_TEMPLATE` is written to ``output_dir/chat_template.jinja`` and installed in the
    returned tokenizer too.

    Raises:
        ModelLoadError: the checkpoint's tokenizer cannot be read.
    """
    tokenizer = Tokenizer.from_pretrained(model.path)
    if tokenizer.chat_templates:
        return tokenizer, None
    template = output_dir / "chat_template.jinja"
    template.write_text(CHAT_TEMPLATE, encoding="utf-8")
    tokenizer.set_chat_template(CHAT_TEMPLATE, origin=str(template))
    return tokenizer, template


# -- step 2: servers ----------------------------------------------------------------------------


def start_servers(
    children: ChildProcesses,
    model: ModelChoice,
    output_dir: Path,
    timeout_s: float,
    price_as: str,
    chat_template: Path | None = None,
    weight_dtype: str = "auto",
) -> tuple[str, dict[str, str]]:
    """Start the engine and, in front of it, one proxy per variant (each logs to its own
    ``<variant>.db``, so each report covers one app); return (engine URL, proxy URL by variant).

    The proxies run with ``--price-as price_as``: the engine's model has no price row, so its
    logged requests are priced at ``price_as``'s rates and the HTML reports show costs.
    ``chat_template``: a template file for a model that ships none (``--chat-template``).
    ``weight_dtype``: the engine's ``--weight-dtype``.
    """
    engine_port = free_port()
    engine_args = [
        "engine", "serve", "--model", str(model.path), "--port", str(engine_port),
        "--served-model-name", model.name, "--log-level", "warning",
    ]  # fmt: skip
    if chat_template is not None:
        engine_args += ["--chat-template", str(chat_template)]
    if weight_dtype != "auto":
        engine_args += ["--weight-dtype", weight_dtype]
    engine_url = f"http://127.0.0.1:{engine_port}"
    engine = children.start("engine", engine_args)
    proxies = {}
    for name, _ in VARIANTS:
        port = free_port()
        db = log_path(output_dir, name)
        for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            stale.unlink(missing_ok=True)  # a previous run's log would mix into the report
        args = [
            "proxy", "--upstream", engine_url, "--port", str(port), "--db", str(db),
            "--store-bodies", "--log-level", "warning", "--price-as", price_as,
        ]  # fmt: skip
        proxies[name] = (children.start(f"proxy-{name}", args), f"http://127.0.0.1:{port}")
    children.wait_healthy(engine, f"{engine_url}/health", timeout_s=timeout_s)
    for child, url in proxies.values():
        children.wait_healthy(child, f"{url}/healthz", timeout_s=timeout_s)
    (output_dir / "processes.json").write_text(
        json.dumps({c.name: c.pid for c in children.children}), encoding="utf-8"
    )
    return engine_url, {name: url for name, (_, url) in proxies.items()}


def served_context(engine_url: str, model: str) -> int:
    """The context the engine serves ``model`` with, in tokens (``max_model_len`` of its
    ``/v1/models`` card: the checkpoint's positions, capped by the KV pool).

    Raises:
        DemoError: the engine did not answer, or its card has no ``max_model_len``.
    """
    try:
        response = httpx.get(f"{engine_url}/v1/models", timeout=30.0)
        cards = response.json()["data"]
        return next(int(c["max_model_len"]) for c in cards if c["id"] == model)
    except (httpx.HTTPError, ValueError, KeyError, TypeError, StopIteration) as exc:
        raise DemoError(
            f"the engine's /v1/models gave no max_model_len for {model}: {exc}"
        ) from exc


def log_path(output_dir: Path, variant: str) -> Path:
    """The SQLite log of the proxy in front of ``variant``'s traffic."""
    return output_dir / f"{variant}.db"


def warm_up(engine_url: str, model: str) -> None:
    """One tiny request straight to the engine (not logged by the proxy): the first forward
    pass pays one-off costs that would otherwise land on the first measured request."""
    body = {"model": model, "prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}
    try:
        response = httpx.post(f"{engine_url}/v1/completions", json=body, timeout=60.0)
    except httpx.HTTPError as exc:
        raise DemoError(f"warm-up request to the engine failed: {exc}") from exc
    if response.status_code != 200:
        raise DemoError(
            f"warm-up request to the engine failed: {response.status_code} {response.text}"
        )


# -- step 3: workload ---------------------------------------------------------------------------


def replay(
    name: str,
    app: ModuleType,
    proxy_url: str,
    model: str,
    plans: list[UserPlan],
    *,
    max_tokens: int,
    instructions: str,
    progress: Progress,
) -> tuple[list[RequestResult], float]:
    """Run the workload through one app; returns (results, wall-clock seconds)."""
    from openai import OpenAI

    total = sum(p.num_requests for p in plans)
    task = progress.add_task(f"{name:8} app", total=total, rate="")
    tokens = {"prompt": 0, "cached": 0}
    lock = threading.Lock()

    def on_result(result: RequestResult) -> None:
        with lock:
            tokens["prompt"] += result.prompt_tokens
            tokens["cached"] += result.cached_tokens
            rate = tokens["cached"] / tokens["prompt"] if tokens["prompt"] else 0.0
        progress.update(task, advance=1, rate=f"hit rate {percent(rate):>6}")

    client = OpenAI(
        base_url=f"{proxy_url}/v1", api_key=f"sk-demo-{name}-app", max_retries=0, timeout=60.0
    )
    start = time.perf_counter()
    try:
        results = run_variant(
            app,
            client,
            model,
            plans,
            max_tokens=max_tokens,
            instructions=instructions,
            on_result=on_result,
        )
    finally:
        client.close()
    return results, time.perf_counter() - start


# -- step 4: the proxy's view -------------------------------------------------------------------


def wait_for_log(db: Path, expected_rows: int, timeout_s: float = 15.0) -> None:
    """Wait until the proxy's background writer has flushed ``expected_rows`` rows to ``db``.

    Raises:
        DemoError: fewer rows after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            # closing(): a connection's own ``with`` commits but does not close it, and a reader
            # still open when the proxy stops keeps that proxy from checkpointing its -wal
            with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
                rows = conn.execute("SELECT count(*) FROM requests").fetchone()[0]
        except sqlite3.Error:
            rows = 0
        if rows >= expected_rows:
            return
        if time.monotonic() > deadline:
            raise DemoError(
                f"the proxy logged {rows} of {expected_rows} requests to {db} within "
                f"{timeout_s:.0f} s; see its proxy-*.log"
            )
        time.sleep(0.2)


def checkpoint_log(db: Path) -> None:
    """Move every row of ``db``'s write-ahead log into ``db`` itself, so the log is one
    self-contained file: a copy of it, or a tool that opens it without its ``-wal``, sees every
    row (SQLite removes the emptied ``-wal`` when the last connection closes). Call once the
    proxy writing to it has stopped.

    Raises:
        DemoError: SQLite could not checkpoint (another connection still reads the log).
    """
    try:
        with closing(sqlite3.connect(db)) as conn:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as exc:
        raise DemoError(f"cannot checkpoint the proxy log {db}: {exc}") from exc
    if busy:
        raise DemoError(f"cannot checkpoint the proxy log {db}: another connection holds it")


def proxy_report(db: Path, html_path: Path) -> list[BreakSummary]:
    """Write ``promptcache report --format html`` of the log; return its break reasons.

    The log holds one variant of this run only, so the report's window is simply the last day.
    """
    from promptcache.proxy.report import build_report
    from promptcache.proxy.report.html import render_html

    now = time.time()
    report = build_report(db, since=now - 86400, until=now + 1, group_by=None, now=now)
    html_path.write_text(render_html(report), encoding="utf-8")
    breaks = []
    with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        for reason in report.break_reasons:
            rows = conn.execute(
                "SELECT break_offset, break_excerpt, break_segment IS ? FROM requests "
                "WHERE break_reason = ? AND started_at >= ? AND started_at < ?",
                (reason.top_segment, reason.reason, report.since, report.until),
            ).fetchall()
            # rows in another segment count as "elsewhere": their offsets are not comparable
            examples, _ = group_break_offsets([(o, e) for o, e, top in rows if top], BREAK_EXAMPLES)
            breaks.append(
                BreakSummary(
                    reason=reason.reason,
                    requests=reason.breaks,
                    tokens_lost=reason.tokens_lost,
                    segment=reason.top_segment,
                    examples=examples,
                    other_requests=reason.breaks - sum(e.requests for e in examples),
                )
            )
    return breaks


def print_sample(
    console: Console, results: list[RequestResult], plans: list[UserPlan], max_tokens: int
) -> None:
    """Print the first story of the first user, as the model answered it in this run; an
    answer that used all ``max_tokens`` is marked as cut there."""
    if not plans or not plans[0].conversations:
        return
    first = plans[0]
    turns = sorted(
        (r for r in results if r.user_id == first.user_id and r.conversation == 0),
        key=lambda r: r.turn,
    )
    console.print(
        f"[bold]One conversation of this run[/bold] (layered app, {first.user_id}, "
        f"whose child is {first.child[0]}):"
    )
    for result in turns:
        console.print(f"   parent: {escape(first.conversations[0][result.turn])}")
        cut = f" [dim](cut at {max_tokens} tokens)[/dim]"
        cut = cut if result.output_tokens >= max_tokens else ""
        console.print(f"   model:  {escape(' '.join(result.answer.split()))}{cut}")
    console.print()


# -- the whole demo -----------------------------------------------------------------------------


def _weights_in_words(weight_dtype: str) -> str:
    if weight_dtype in ("auto", "float"):
        return "float weights"
    if weight_dtype == "int4":  # the LM head stays int8 (quant_linear.quantize_linears)
        return "int4 weight-only decoder layers and an int8 LM head"
    return f"{weight_dtype} weight-only linear layers"


def model_line(model: ModelChoice, weight_dtype: str, why: str) -> str:
    """The header's model line: its name, how it was chosen and its path (relative to the
    working directory when it lies inside it, as the other paths the demo prints), and the
    weights it is served with."""
    return (
        f"Model: {model.name} ({model.source}: {_relative(model.path)}), served by the bundled "
        f"engine with {_weights_in_words(weight_dtype)} ({why})."
    )


def workload_line(users: int, requests_per_user: int, max_tokens: int) -> str:
    """The workload in words, as ``plan_workload`` builds it: ``3 parents at once, 4 requests
    each, stories of 4 turns, answers of up to 32 tokens``; stories are four-turn arcs, fewer
    turns when a user sends fewer requests, the last one cut short when the count is not a
    multiple of four (``stories of 4 turns (the last of 2)``)."""
    arc = len(STORY_ARCS[0])
    if requests_per_user < arc:
        stories = f"stories of {plural(requests_per_user, 'turn')}"
    elif requests_per_user % arc:
        stories = f"stories of {arc} turns (the last of {requests_per_user % arc})"
    else:
        stories = f"stories of {arc} turns"
    return (
        f"{plural(users, 'parent', grouped=True)} at once, "
        f"{plural(requests_per_user, 'request', grouped=True)} each, {stories}, "
        f"answers of up to {plural(max_tokens, 'token', grouped=True)}"
    )


def run_demo(options: DemoOptions, console: Console) -> DemoResult:
    """Run every step; print progress and the summary to ``console``.

    Raises:
        ConfigError: no usable model, bad options, or the example apps are missing.
        DemoError: a server failed to start or a request failed (messages name the log file).
    """
    if options.users < 1 or options.requests_per_user < 1:
        raise ConfigError("--users and --requests-per-user must be at least 1")
    root = repo_root()
    apps = {name: root / "examples" / file for name, file in VARIANTS}
    data = root / "examples" / INSTRUCTIONS_FILE
    missing = [str(p) for p in (*apps.values(), data) if not p.is_file()]
    if missing:
        raise ConfigError(
            f"the demo's example apps are missing ({', '.join(missing)}); run the demo from a "
            "clone of the promptcache repository (`make demo`)"
        )
    out = options.output_dir
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        # a file where the folder, or a folder above it, should be: said in the words of every
        # command that writes a file (summary.json is one the demo writes in it)
        in_the_way = isinstance(exc, (FileExistsError, NotADirectoryError))
        why = folder_problem(out / "summary.json") if in_the_way else None
        raise ConfigError(
            f"cannot create --output-dir {out}: {why or exc.strerror or exc}; pass a writable "
            "folder"
        ) from exc
    model = resolve_model(options.model)
    try:
        weight_dtype, why = serving_weight_dtype(model, options.weight_dtype)
        tokenizer, chat_template = load_tokenizer(model, out)
    except ModelLoadError as exc:  # e.g. a truncated file: say where the path came from
        given = model.source.startswith(("--", "$"))
        origin = f"given by {model.source}" if given else f"chosen as {model.source}"
        raise ModelLoadError(f"{exc} (the model {origin})") from exc
    modules = {name: load_app(path, name) for name, path in apps.items()}
    plans = plan_workload(options.users, options.requests_per_user)
    console.rule("[bold]promptcache demo")
    console.print(
        "StoryTime, a bedtime-story chat app, written twice: [bold]naive[/bold] "
        "(examples/naive_app.py) and [bold]layered[/bold] (examples/layered_app.py).\n"
        f"{model_line(model, weight_dtype, why)}\n"
        f"Workload, the same for both apps: "
        f"{workload_line(options.users, options.requests_per_user, options.max_tokens)}.\n"
    )

    console.print("[bold]1. Lint both apps[/bold] (promptcache lint)")
    findings = lint_apps(apps, out)
    for name, path in apps.items():
        if not findings[name]:
            console.print(f"   {_relative(path)}: no findings")
        for f in findings[name]:
            short = f.message.split(";")[0]
            origin = f", value born at line {f.origin_line}" if f.origin_line else ""
            console.print(f"   {f.path}:{f.line}: [red]{f.code}[/red] {escape(short)}{origin}")

    console.print(
        "\n[bold]   ... and check them[/bold] (promptcache check: each app's story run twice, the "
        "clock, random/uuid, hash seed, listing order and pid changed; check's own endpoint)"
    )
    checked = check_apps(apps, out)
    for name, path in apps.items():
        if not checked[name]:
            console.print(f"   {_relative(path)}: no findings")
        for c in checked[name]:
            causes = " or ".join(c.causes) or "structure"
            console.print(
                f"   {_relative(path)}:{c.line} in {c.function}: [red]{c.code}[/red] {c.title} "
                f"({c.field}, caused by {causes})"
            )

    summaries: dict[str, VariantSummary] = {}
    with ChildProcesses(out) as children:
        console.print("\n[bold]2. Start the engine and one logging proxy per app[/bold]")
        with console.status("starting (loading the model)..."):
            engine_url, proxies = start_servers(
                children, model, out, options.startup_timeout_s, options.price_model,
                chat_template, options.weight_dtype or "auto",  # the engine resolves auto alike
            )  # fmt: skip
            warm_up(engine_url, model.name)
        console.print(f"   engine: {engine_url}  (promptcache engine serve)")
        for name, url in proxies.items():
            shown = _relative(log_path(out, name))
            console.print(f"   proxy for the {name} app: {url} -> engine, log {shown}")
        fit = fit_instructions(
            modules["naive"].load_instructions(),
            list(modules.values()),
            plans,
            tokenizer,
            max_model_len=served_context(engine_url, model.name),
            max_tokens=options.max_tokens,
        )
        console.print("   " + describe_instructions(fit, model.name, _relative(data)))

        console.print(
            "\n[bold]3. Replay the same workload through each app[/bold] "
            "(openai client -> proxy -> engine)"
        )
        runs: dict[str, tuple[list[RequestResult], float]] = {}
        columns = (
            TextColumn("   {task.description}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console) as progress:
            for name, _ in VARIANTS:
                runs[name] = replay(
                    name, modules[name], proxies[name], model.name, plans,
                    max_tokens=options.max_tokens, instructions=fit.text, progress=progress,
                )  # fmt: skip

        console.print("\n[bold]4. Read the proxies' logs[/bold] (promptcache report)")
        for name, (results, wall_s) in runs.items():
            db = log_path(out, name)
            wait_for_log(db, len(results))
            html = out / f"report-{name}.html"
            breaks = proxy_report(db, html)
            summaries[name] = summarize_variant(
                name,
                _relative(apps[name]),
                results,
                users=options.users,
                wall_s=wall_s,
                price_model=options.price_model,
                breaks=breaks,
                report_path=_relative(html),
                lint=findings[name],
            )
            console.print(f"   wrote {_relative(html)}")
    # The servers are stopped here: fold each log's -wal into its .db, then print.
    for name, _ in VARIANTS:
        checkpoint_log(log_path(out, name))
    console.print()
    print_sample(console, runs["layered"][0], plans, options.max_tokens)
    render_summary(console, summaries["naive"], summaries["layered"], fit)
    with (out / "requests.jsonl").open("w", encoding="utf-8") as lines:
        for name, (results, _) in runs.items():
            for result in results:
                lines.write(json.dumps({"variant": name, **asdict(result)}) + "\n")
    summary_path = out / "summary.json"
    summary_path.write_text(
        json.dumps(
            {
                "model": {
                    "name": model.name,
                    "path": str(model.path),
                    "source": model.source,
                    "weight_dtype": weight_dtype,
                    "weights": f"{_weights_in_words(weight_dtype)} ({why})",
                },
                "users": options.users,
                "requests_per_user": options.requests_per_user,
                "max_tokens": options.max_tokens,
                "instructions": {k: v for k, v in asdict(fit).items() if k != "text"},
                "variants": {k: v.to_dict() for k, v in summaries.items()},
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return DemoResult(model, summaries["naive"], summaries["layered"], summary_path)
