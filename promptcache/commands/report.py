"""``promptcache report``: hit rate, cost, savings and cache breaks from the proxy's log."""

from __future__ import annotations

import math
import os
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from promptcache.folders import folder_problem
from promptcache.formatting import dollars, percent, usd

from ._log_db import LOG_DB
from ._numbers import FiniteFloatRange
from ._option_args import OptionArgCommand, looks_like_log

if TYPE_CHECKING:  # click >= 8.2 makes ParamType generic; older ones cannot be subscripted
    from promptcache.proxy.report.advice import EngineKvStats

    _ParamType = click.ParamType[float, Any]
else:
    _ParamType = click.ParamType

#: Same values as promptcache.proxy.report.GROUP_BY_CHOICES (tests/proxy/test_report_cli.py
#: checks they agree; kept here so --help imports nothing heavy).
GROUP_BY = ("model", "route", "key", "day", "hour")
FORMATS = ("table", "json", "csv", "html")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
#: Unix seconds of 0001-01-01 and 9999-12-31 (datetime's range), the widest window accepted.
_FIRST_S = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
_LAST_S = datetime(9999, 12, 31, tzinfo=timezone.utc).timestamp()
#: A hit rate (float) or a dollar amount (Decimal), as an alert prints it beside its threshold.
T = TypeVar("T", float, Decimal)


def _invocation_now(ctx: click.Context | None) -> float:
    """The one "now" of a command's run: ``--since 24h``, ``--until 1h`` and the default
    ``--until`` all count from it (each reading the clock anew made ``--since 24h`` a window of
    24 hours and the seconds the command took to start)."""
    if ctx is None:
        return time.time()
    now: float = ctx.find_root().meta.setdefault("promptcache.report.now", time.time())
    return now


class TimeBound(_ParamType):
    """A point in time: a duration back from now (``90m``, ``24h``, ``7d``), an ISO 8601 date
    or date-time (UTC unless it carries an offset), or unix seconds. Converts to unix seconds."""

    name = "TIME"

    def __init__(self, now: float | None = None) -> None:
        self.now = now

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, (int, float)):
            return self._in_calendar(float(value), str(value), param, ctx)
        text = str(value)
        now = self.now if self.now is not None else _invocation_now(ctx)
        match = _DURATION.match(text)
        if match:
            back = float(match.group(1)) * _UNITS[match.group(2)]
            return self._in_calendar(now - back, text, param, ctx)
        try:
            return self._in_calendar(float(text), text, param, ctx)
        except ValueError:
            pass
        try:
            parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            self.fail(
                f"{text!r} is not a time: use a duration back from now (30m, 24h, 7d), an ISO "
                "date or date-time (2026-11-30, 2026-11-30T12:00), or unix seconds",
                param,
                ctx,
            )
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.timestamp()

    def _in_calendar(
        self, seconds: float, text: str, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        """``seconds`` if it is a finite unix time between years 1 and 9999 (what the report
        can print as a date); else a usage error. ``nan`` and ``inf`` parse as floats, and a
        huge duration (``99999999d``) lands before year 1."""
        if not _FIRST_S <= seconds <= _LAST_S:  # also false for NaN
            self.fail(
                f"{text!r} is outside the calendar: give a time between years 1 and 9999 "
                "(a duration such as 7d, an ISO date, or unix seconds)",
                param,
                ctx,
            )
        return seconds


class HitRateThreshold(FiniteFloatRange):
    """A hit rate from 0 to 1; a percentage (2 to 100) is refused with the fraction to
    pass instead, as click's range message alone leaves the user to guess."""

    def __init__(self) -> None:
        super().__init__(0.0, 1.0)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if 2.0 <= number <= 100.0:
            self.fail(
                f"{value!r} is above 1: a hit rate is a fraction from 0 to 1, so for "
                f"{number:g}% pass {number / 100:g}",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


@click.command(name="report", cls=OptionArgCommand, value_option="--db", looks_like=looks_like_log)
@click.option(
    "--db",
    "dbs",
    multiple=True,
    default=["promptcache.db"],
    show_default=True,
    type=LOG_DB,
    help="The proxy's SQLite log, or the postgresql://user@host/dbname log several proxies "
    "share; repeat it to report several proxies' SQLite logs as one.",
)
@click.option(
    "--since",
    default="24h",
    show_default=True,
    type=TimeBound(),
    help="Start of the window: 24h / 7d back from now, an ISO date-time, or unix seconds.",
)
@click.option("--until", default=None, type=TimeBound(), help="End of the window (default: now).")
@click.option(
    "--group-by", type=click.Choice(GROUP_BY), default=None, help="Add a table per group."
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="html is one self-contained file with charts.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write to this file instead of stdout.",
)
@click.option(
    "--fail-under-hit-rate",
    type=HitRateThreshold(),
    default=None,
    help="Exit 1 when the token-weighted hit rate is below this (0..1), for CI or cron.",
)
@click.option(
    "--fail-over-cost",
    type=FiniteFloatRange(min=0.0),
    default=None,
    help="Exit 1 when the window's cost in USD is above this.",
)
@click.option(
    "--engine-metrics",
    metavar="URL|FILE",
    default=None,
    help="The engine server's /metrics (URL, or a saved copy) for the KV-pool advice.",
)
def report_command(
    dbs: tuple[Path | str, ...],
    since: float,
    until: float | None,
    group_by: str | None,
    output_format: str,
    output: Path | None,
    fail_under_hit_rate: float | None,
    fail_over_cost: float | None,
    engine_metrics: str | None,
) -> None:
    """Report hit rate, cost, savings, cache breaks and advice from the proxy's log.

    Token- and request-weighted hit rate, input tokens by bucket, cost and cost without cache,
    net savings (write premium included), wasted writes, top cache-break reasons with tokens
    and dollars lost, TTFT for hits vs misses, TTL advice per prefix family, recommendations.
    With --fail-under-hit-rate / --fail-over-cost the report is still printed, then the
    command exits 1 if a threshold is crossed.

    \b
    Example:
        promptcache report --db promptcache.db --since 24h --group-by model
        promptcache report --since 7d --format html --output report.html
        promptcache report --since 1h --fail-under-hit-rate 0.6 --fail-over-cost 25
        promptcache report --engine-metrics http://127.0.0.1:8000/metrics
        promptcache report --db proxy-a.db --db proxy-b.db   # several proxies as one
    """
    if output is not None:
        _refuse_output_onto_a_log(output, dbs)
    from promptcache.proxy.report import build_report
    from promptcache.proxy.report.advice import EngineKvStats
    from promptcache.proxy.report.html import render_html
    from promptcache.proxy.report.render import render_csv, render_json, render_table

    engine = None
    if engine_metrics is not None:
        engine = EngineKvStats.from_prometheus(_read_metrics(engine_metrics))
    now = _invocation_now(click.get_current_context())
    if until is None and since >= now:
        raise click.BadParameter(
            "the window from --since to now is empty: give a duration above 0 (30m, 24h) or a "
            "time in the past",
            param_hint="'--since'",
        )
    result = build_report(
        dbs,
        since=since,
        until=until if until is not None else now,
        group_by=group_by,
        now=now,
        engine=engine,
    )
    if output_format == "json":
        text = render_json(result)
    elif output_format == "csv":
        text = render_csv(result)
    elif output_format == "html":
        text = render_html(result)
    else:
        color = output is None and sys.stdout.isatty()
        text = render_table(result, color=color)
        if engine is not None:
            text += _engine_table(engine, color=color)
    if output is not None:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            why = folder_problem(output) or exc.strerror or str(exc)
            raise click.BadParameter(
                f"cannot write {output}: {why}", param_hint="--output"
            ) from None
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)

    failures = []
    rate = result.total.token_hit_rate
    if fail_under_hit_rate is not None and (rate or 0.0) < fail_under_hit_rate:
        shown, under = _told_apart(rate or 0.0, fail_under_hit_rate, percent, range(1, 7))
        failures.append(
            f"no input tokens in the window, counted as hit rate {shown}, under {under}"
            if rate is None
            else f"hit rate {shown} is under {under}"
        )
    cost = dollars(result.total.cost_usd)
    if fail_over_cost is not None and cost > Decimal(str(fail_over_cost)):
        shown, over = _told_apart(cost, Decimal(str(fail_over_cost)), usd, range(4, 11))
        failures.append(f"cost {shown} is over {over}")
    if failures:
        click.echo("alert: " + "; ".join(failures), err=True)
        raise SystemExit(1)


def _told_apart(
    value: T, limit: T, show: Callable[[T, int], str], places: range
) -> tuple[str, str]:
    """``value`` and the alert threshold ``limit`` it crossed as ``show`` prints them, at the
    fewest of ``places`` that print them differently (a hit rate of 64.07% under 0.641 is
    "64.07%" under "64.10%", not "64.1%" under "64.1%"); at the last of ``places`` if none does."""
    for n in places:
        shown = show(value, n), show(limit, n)
        if shown[0] != shown[1]:
            break
    return shown


def _refuse_output_onto_a_log(output: Path, dbs: tuple[Path | str, ...]) -> None:
    """A usage error when ``--output`` names a SQLite log being read (or its -wal, -shm or
    -journal file): writing the report there would replace the log's rows with the report."""
    target = output.resolve()
    for db in dbs:
        if not isinstance(db, Path):  # a Postgres URL
            continue
        log = db.resolve()
        companions = [log.with_name(log.name + suffix) for suffix in ("-wal", "-shm", "-journal")]
        same = target in (log, *companions) or (
            target.exists() and log.exists() and os.path.samefile(target, log)
        )
        if same:
            raise click.BadParameter(
                f"{output} is the proxy log given with --db {db} (or a file of it): writing the "
                "report there would destroy the log; give another file",
                param_hint="--output",
            )


def _engine_table(engine: EngineKvStats, *, color: bool) -> str:
    """The engine's KV-pool state read from --engine-metrics, as a table for the text report
    (--format json has it under ``engine``)."""
    import io

    from rich.console import Console
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(file=buffer, width=120, force_terminal=color, no_color=not color)
    table = Table(
        title="Engine KV pool (--engine-metrics)", show_header=False, title_justify="left"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("KV blocks in use", percent(engine.kv_usage))
    table.add_row("preemptions since start", f"{engine.num_preemptions:,}")
    table.add_row("sequences swapped out now", f"{engine.num_swapped:,}")
    hit_rate = engine.prefix_cache_hit_rate
    table.add_row(
        "prefix-cache hit rate since start",
        percent(hit_rate, missing="n/a (no lookups yet)"),
    )
    console.print(table)
    return buffer.getvalue()


def _read_metrics(source: str) -> str:
    """The text of a Prometheus exposition at a URL or in a file."""
    if source.startswith(("http://", "https://")):
        import httpx

        try:
            response = httpx.get(source, timeout=10.0)
            response.raise_for_status()
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise click.BadParameter(
                f"cannot read {source}: {exc}", param_hint="--engine-metrics"
            ) from None
        return response.text
    try:
        return Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise click.BadParameter(
            f"cannot read {source}: {exc.strerror}", param_hint="--engine-metrics"
        ) from None
    except UnicodeDecodeError as exc:
        raise click.BadParameter(
            f"cannot read {source}: not UTF-8 text (byte {exc.start}); a Prometheus "
            "exposition is text, saved from the engine server's /metrics",
            param_hint="--engine-metrics",
        ) from None
