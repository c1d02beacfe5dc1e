"""Text renderings of a :class:`~.report.Report`: a rich table, JSON and CSV.

The HTML rendering lives in :mod:`.report.html`. Rates print as percentages, tokens with
thousands separators, money in USD with 4 decimals (JSON: decimal strings rounded to 6 places, see
:meth:`~.report.Report.to_dict`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from decimal import Decimal
from typing import Final

from rich.console import Console, Group
from rich.table import Table

from promptcache import formatting
from promptcache.formatting import percent
from promptcache.usage import USAGE_TOKEN_COLUMNS

from ..breaks import ENGINE_BLOCK_TOKENS
from . import BreakReasonSummary, Report, Summary, WastedWrites, usd_text
from .advice import NO_RECOMMENDATIONS
from .agreement import Agreement, AgreementExample, AgreementRow
from .replicas import ReplicaSummary

__all__ = [
    "AGREEMENT_EXAMPLE_HEADER",
    "AGREEMENT_HEADER",
    "CSV_COLUMNS",
    "REPLICA_HEADER",
    "TTFT_NOTE",
    "agreement_cells",
    "agreement_example_cells",
    "agreement_line",
    "agreement_tables",
    "block_lost_notes",
    "csv_cell",
    "engine_lost_note",
    "pct",
    "priced_as_notes",
    "render_csv",
    "render_json",
    "render_table",
    "replica_cells",
    "replica_table",
    "requests_text",
    "summary_rows",
    "usd",
    "window_time",
]


#: What the TTFT figures measure, said wherever they are shown: the proxy times the first byte
#: of the response, which for a non-streamed response is its last.
TTFT_NOTE = (
    "time to the first byte of the response: the first token when streamed, the whole "
    "response when not"
)


def window_time(ts: float) -> str:
    """A window bound (unix s) as UTC text, to the second (``2025-11-30 09:17:05 UTC``); a
    whole minute without its ``:00`` (``2025-11-30 09:00 UTC``). Fractions of a second are
    dropped (the JSON has the exact bounds)."""
    moment = datetime.fromtimestamp(ts, tz=timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M UTC" if ts % 60 == 0 else "%Y-%m-%d %H:%M:%S UTC")


def pct(value: float | None) -> str:
    return percent(value)


def usd(value: float) -> str:
    return formatting.usd(value, minus_first=True)


#: A dollar figure of requests none of which could be priced (their models have no price row).
UNPRICED: Final = "n/a (unpriced)"


def money(s: Summary, value: float, part: BreakReasonSummary | WastedWrites | None = None) -> str:
    """``value`` in dollars, or :data:`UNPRICED` for a zero amount of ``s`` (the window or a
    group) when it has requests with usage and every one of them is unpriced, or of ``part``
    (a break reason, the wasted writes) when every one of its requests is unpriced: their cost
    is unknown, not $0."""
    if not value and (s.all_unpriced or (part is not None and part.all_unpriced)):
        return UNPRICED
    return usd(value)


def engine_lost_note(breaks: int) -> str:
    """What the tokens lost of the engine upstream's breaks count: whole tokens, where the
    engine reuses whole KV blocks only and always computes the last prompt token (docs/engine.md),
    so one such break could have read up to a block fewer tokens than its figure."""
    return (
        f"{formatting.plural(breaks, 'break')} of the engine upstream: tokens lost counts whole "
        "tokens, but the engine reads its prefix cache in whole KV blocks "
        f"({ENGINE_BLOCK_TOKENS} tokens at its default --block-size) and always computes the "
        "last prompt token, so each such break lost up to one block fewer than counted"
    )


#: Where OpenAI documents that its cache holds 1,024 tokens and then 128-token increments.
OPENAI_CACHING_URL = "https://developers.openai.com/api/docs/guides/prompt-caching"
#: Where vLLM documents that it caches full blocks only and computes the last prompt token.
VLLM_CACHING_URL = "https://docs.vllm.ai/en/latest/design/prefix_caching.html"


def block_lost_notes(report: Report) -> list[str]:
    """One sentence per upstream whose breaks' tokens lost count whole tokens where its prefix
    cache holds whole blocks (the engine upstream, ``report.engine_breaks``; OpenAI and
    OpenAI-compatible ones, ``report.automatic_breaks``): how far each such figure can exceed
    what a stable prefix could have read. Empty without breaks in the table."""
    if not report.break_reasons:
        return []
    notes = [engine_lost_note(report.engine_breaks)] if report.engine_breaks else []
    openai = report.automatic_breaks.get("openai", 0)
    if openai:
        notes.append(
            f"{formatting.plural(openai, 'break')} of the OpenAI upstream: tokens lost counts "
            "the predecessor's whole input as cached, but OpenAI's automatic cache holds a "
            "prompt's prefix from 1,024 tokens on, in 128-token increments "
            f"({OPENAI_CACHING_URL}), so each such break lost up to 127 tokens fewer than "
            "counted, and none when it or its predecessor had fewer than 1,024"
        )
    compatible = report.automatic_breaks.get("openai_compatible", 0)
    if compatible:
        notes.append(
            f"{formatting.plural(compatible, 'break')} of OpenAI-compatible upstreams: tokens "
            "lost counts the predecessor's whole input as cached, but an engine's automatic "
            "prefix cache holds whole KV blocks only (vLLM's also leaves out the last prompt "
            f"token: {VLLM_CACHING_URL}), so each such break lost up to one block fewer than "
            "counted"
        )
    return notes


def requests_text(s: Summary) -> str:
    """``3 (2 with usage, 1 without; 2 errors out of all 3)``: with and without usage split the
    requests; the errors are counted out of all of them, since an error can carry usage (a
    stream cut off after Anthropic's ``message_start``, a mid-stream ``event: error``)."""
    without = s.requests - s.requests_with_usage
    errors = formatting.plural(s.errors, "error", grouped=True)
    of = f"all {s.requests:,}" if s.requests > 1 else str(s.requests)  # 'all' of two or more
    return (
        f"{s.requests:,} ({s.requests_with_usage:,} with usage, {without:,} without; "
        f"{errors} out of {of})"
    )


def summary_rows(s: Summary, report: Report) -> list[tuple[str, str]]:
    wasted = report.wasted_writes
    return [
        ("Requests", requests_text(s)),
        ("Hit rate, token-weighted", pct(s.token_hit_rate)),
        ("Hit rate, request-weighted", pct(s.request_hit_rate)),
        ("Requests with a cache hit (read >= 1 cached token)", f"{s.hit_requests:,}"),
        ("Input tokens, uncached", f"{s.uncached_input_tokens:,}"),
        ("Input tokens, cache read", f"{s.cache_read_tokens:,}"),
        ("Input tokens, cache write 5m", f"{s.cache_write_5m_tokens:,}"),
        ("Input tokens, cache write 1h", f"{s.cache_write_1h_tokens:,}"),
        ("Input tokens, cache write (TTL unknown)", f"{s.cache_write_unknown_tokens:,}"),
        ("Output tokens", f"{s.output_tokens:,}"),
        ("Cost", money(s, s.cost_usd)),
        ("Cost without cache", money(s, s.cost_without_cache_usd)),
        ("Net savings (write premium included)", money(s, s.net_savings_usd)),
        (
            "Wasted writes (never read within TTL)",
            f"{wasted.tokens:,} tokens in "
            f"{formatting.plural(wasted.requests, 'request', grouped=True)}, "
            f"{money(s, wasted.premium_usd, wasted)} premium",
        ),
        ("Unpriced requests (not in cost)", f"{s.unpriced_requests:,}"),
        ("Cache breaks", f"{s.breaks:,}"),
        ("New prefixes (first request of a prefix, not a break)", f"{s.new_prefixes:,}"),
        ("Unexpected misses", f"{s.unexpected_misses:,}"),
    ]


def priced_as_notes(report: Report) -> list[str]:
    """One line per model the proxy priced at another model's rates (``price_as``), then one for
    the requests no rates priced (their model has no price row), which every cost figure leaves
    out: without that line a log of self-hosted traffic reads as costing $0."""
    notes = [
        f"{formatting.plural(p.requests, 'request', grouped=True)} for "
        f"{p.model or '(no model)'} (no price row) {'is' if p.requests == 1 else 'are'} priced "
        f"at {p.priced_as}'s rates (proxy price_as)"
        for p in report.priced_as
    ]
    unpriced = report.total.unpriced_requests
    if unpriced:
        notes.append(
            f"{formatting.plural(unpriced, 'request', grouped=True)} "
            f"{'is' if unpriced == 1 else 'are'} unpriced (no price row for the model) and in "
            "no cost or $ figure; a proxy started with --price-as MODEL prices such requests at "
            "MODEL's rates (docs/proxy.md)"
        )
    return notes


def render_table(report: Report, *, width: int = 120, color: bool = False) -> str:
    """The report as rich tables, returned as text (ANSI colours only when ``color``)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, no_color=not color)
    console.print(
        f"[bold]promptcache report[/bold]  {window_time(report.since)} -> "
        f"{window_time(report.until)}  ({report.db_shown})"
    )
    summary = Table(title="Summary", show_header=False, title_justify="left")
    summary.add_column("metric")
    summary.add_column("value", justify="right")
    for name, value in summary_rows(report.total, report):
        summary.add_row(name, value)
    console.print(summary)
    for note in priced_as_notes(report):
        console.print(f"  * {note}", soft_wrap=False)

    if report.groups:
        groups = Table(title=f"By {report.group_by}", title_justify="left")
        groups.add_column(report.group_by or "group", overflow="fold", min_width=18)
        for name in ("requests", "hit rate tok", "hit rate req", "cache read", "cache write",
                     "cost", "savings", "breaks"):  # fmt: skip
            groups.add_column(name, justify="right")
        for g in report.groups:
            groups.add_row(
                g.group or "-", f"{g.requests:,}", pct(g.token_hit_rate),
                pct(g.request_hit_rate), f"{g.cache_read_tokens:,}",
                f"{g.cache_write_tokens:,}", money(g, g.cost_usd), money(g, g.net_savings_usd),
                f"{g.breaks:,}",
            )  # fmt: skip
        console.print(groups)

    if report.replicas:
        console.print(replica_table(report))

    breaks = Table(title="Cache breaks by reason", title_justify="left")
    breaks.add_column("reason")
    for name in ("breaks", "tokens lost", "$ lost"):
        breaks.add_column(name, justify="right")
    breaks.add_column("top segment", overflow="fold")
    breaks.add_column("example request ids", no_wrap=True, min_width=32)
    for b in report.break_reasons:
        breaks.add_row(
            b.reason, f"{b.breaks:,}", f"{b.tokens_lost:,}", money(report.total, b.usd_lost, b),
            f"{b.top_segment} ({b.top_segment_breaks})" if b.top_segment else "-",
            "\n".join(b.example_ids),
        )  # fmt: skip
    console.print(breaks if report.break_reasons else "No cache breaks recorded.")
    for note in block_lost_notes(report):
        console.print(f"  * {note}", soft_wrap=False)
    if report.agreement is not None:
        for table in agreement_tables(report.agreement):
            console.print(table)

    ttft = Table(title=f"TTFT (ms), successful requests; {TTFT_NOTE}", title_justify="left")
    for name in ("requests", "count", "p50", "p95"):
        ttft.add_column(name, justify="left" if name == "requests" else "right")
    for t in report.ttft:
        label = "cache hit (>= 1 cached token)" if t.hit else "cache miss (0 cached tokens)"
        ttft.add_row(label, f"{t.requests:,}", f"{t.p50_ms:,.1f}", f"{t.p95_ms:,.1f}")
    console.print(ttft if report.ttft else "No TTFT measurements.")

    if report.ttl_advice:
        ttl = Table(title="TTL advisor (busiest prefix families)", title_justify="left")
        for name in ("family", "requests", "prefix tokens", "now", "best", "saves"):
            ttl.add_column(name, justify="left" if name in ("family", "now", "best") else "right")
        for a in report.ttl_advice:
            ttl.add_row(
                a.label, f"{a.requests:,}", f"{a.prefix_tokens:,}", a.current, a.recommended,
                usd(a.savings_usd),
            )  # fmt: skip
        console.print(ttl)

    console.print("[bold]Recommendations[/bold]")
    if not report.recommendations:
        console.print(f"  {NO_RECOMMENDATIONS}")
    for i, rec in enumerate(report.recommendations, 1):
        console.print(f"  {i}. {rec.message}", soft_wrap=False)
    return buffer.getvalue()


#: Header of the by-replica table (text and HTML), one cell per :func:`replica_cells` value.
REPLICA_HEADER: tuple[str, ...] = (
    "upstream", "replica", "requests", "share", "hit rate tok", "cache read", "prompt tokens",
    "by prefix", "new prefix", "overloaded", "retried", "errors", "routed/avail", "regret tok",
)  # fmt: skip


def replica_cells(r: ReplicaSummary) -> list[str]:
    """One row of the by-replica table; the fleet-total row shows max/mean load as its share."""
    share = f"{r.max_over_mean:.2f} max/mean" if r.max_over_mean is not None else pct(r.share)
    return [
        r.upstream, r.replica or "(fleet total)", f"{r.requests:,}", share,
        pct(r.token_hit_rate), f"{r.cache_read_tokens:,}", f"{r.total_input_tokens:,}",
        f"{r.routed_prefix:,}", f"{r.routed_new_prefix:,}", f"{r.routed_overloaded:,}",
        f"{r.retried:,}", f"{r.errors:,}",
        pct(r.routed_share), f"{r.regret_tokens:,}" if r.available_tokens else "n/a",
    ]  # fmt: skip


#: Where the text report splits the by-replica columns after the upstream and replica names:
#: load and hits in one table, routing in a second. All 14 in one table of 120 characters
#: squeezed each name to 5 characters a line (``http:`` ``//127`` ``.0.0.`` ...).
REPLICA_TEXT_SPLIT = REPLICA_HEADER.index("by prefix")


def replica_table(report: Report) -> Group:
    """Requests and hit rate by replica, then each fleet's total (``Report.replicas``): two
    tables, each headed by the upstream and replica names (load and hits; routing)."""
    rows = [replica_cells(r) for r in report.replicas]
    styles = ["bold" if r.replica is None else None for r in report.replicas]
    tables = []
    for title, columns, lines in (
        ("By replica", range(2, REPLICA_TEXT_SPLIT), " "),
        # a routing header of two words takes two lines, leaving the names room
        ("By replica: routing", range(REPLICA_TEXT_SPLIT, len(REPLICA_HEADER)), "\n"),
    ):
        table = Table(title=title, title_justify="left")
        for i in (0, 1):
            table.add_column(REPLICA_HEADER[i], overflow="fold")
        for i in columns:
            table.add_column(
                REPLICA_HEADER[i].replace(" ", lines), justify="right", overflow="fold"
            )
        for cells, style in zip(rows, styles, strict=True):
            table.add_row(*(cells[i] for i in (0, 1, *columns)), style=style)
        tables.append(table)
    return Group(*tables)


#: Header of the agreement table (text and HTML), one cell per :func:`agreement_cells` value.
AGREEMENT_HEADER: tuple[str, ...] = (
    "api", "our reason", "vendor's reason", "requests", "same previous", "verdict",
)  # fmt: skip
#: Header of the disagreement examples, one cell per :func:`agreement_example_cells` value.
AGREEMENT_EXAMPLE_HEADER: tuple[str, ...] = (
    "request id", "our reason", "vendor's reason", "our previous request", "vendor compared with",
)  # fmt: skip
#: How a request that kept its cached prefix (``break_reason`` NULL) shows as our reason.
NO_BREAK = "(no break)"


def agreement_line(a: Agreement) -> str:
    """The agreement table's title: what was counted, and the three verdicts."""
    return (
        "Our break reasons against the vendors' own diagnoses: "
        f"{formatting.plural(a.requests, 'request', grouped=True)} with one, "
        f"{a.agree:,} agree, {a.disagree:,} disagree, {a.inconclusive:,} inconclusive; "
        f"{a.same_previous:,} compared with the same previous request"
    )


def agreement_cells(r: AgreementRow) -> list[str]:
    """One row of the agreement table."""
    return [r.api, r.ours or NO_BREAK, r.vendor, f"{r.requests:,}", f"{r.same_previous:,}",
            r.verdict]  # fmt: skip


def agreement_example_cells(e: AgreementExample) -> list[str]:
    """One disagreement example."""
    return [e.request_id, e.ours or NO_BREAK, e.vendor, e.previous_request_id or "-",
            e.vendor_comparison_id or "-"]  # fmt: skip


def agreement_tables(a: Agreement) -> list[Table]:
    """The agreement table, then the disagreement examples when there are any."""
    table = Table(title=agreement_line(a), title_justify="left")
    for i, name in enumerate(AGREEMENT_HEADER):
        table.add_column(name, justify="right" if i in (3, 4) else "left", overflow="fold")
    for row in a.rows:
        table.add_row(*agreement_cells(row))
    tables = [table]
    if a.examples:
        examples = Table(title="Where they disagree (examples)", title_justify="left")
        for name in AGREEMENT_EXAMPLE_HEADER:
            whole = name == "request id"  # 32 hex digits, kept on one line
            width = 32 if whole else None
            examples.add_column(name, overflow="fold", no_wrap=whole, min_width=width)
        for e in a.examples:
            examples.add_row(*agreement_example_cells(e))
        tables.append(examples)
    return tables


def render_json(report: Report) -> str:
    """The report as indented JSON (every field of :meth:`Report.to_dict`)."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n"


#: Columns of ``--format csv``: one row per group, then a ``(total)`` row; the last two are the
#: window's exact bounds (unix s), the same on every row.
CSV_COLUMNS: tuple[str, ...] = (
    "group",
    "requests",
    "requests_with_usage",
    "hit_requests",
    "token_hit_rate",
    "request_hit_rate",
    *USAGE_TOKEN_COLUMNS,
    "total_input_tokens",
    "cost_usd",
    "cost_without_cache_usd",
    "net_savings_usd",
    "unpriced_requests",
    "errors",
    "breaks",
    "unexpected_misses",
    "new_prefixes",
    "priced_as",
    "since",
    "until",
)


#: A text cell starting with one of these is read as a formula by Excel, LibreOffice Calc and
#: Google Sheets (OWASP, https://owasp.org/www-community/attacks/CSV_Injection).
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """One CSV cell: ``None`` empty, floats rounded to 6 decimals in plain notation
    (``0.000045``, never ``4.5e-05``), text neutralised.

    Text that starts with ``=``, ``+``, ``-``, ``@``, tab or carriage return (a model named
    ``=HYPERLINK(...)`` reaches the log from any client) gets a leading single quote, so a
    spreadsheet shows it as text instead of evaluating it, as OWASP advises
    (https://owasp.org/www-community/attacks/CSV_Injection). Numbers are never touched: a
    negative ``net_savings_usd`` stays a number.
    """
    if value is None:
        return ""
    if isinstance(value, float):
        return format(Decimal(repr(round(value, 6))), "f")
    if isinstance(value, str) and value.startswith(FORMULA_TRIGGERS):
        return "'" + value
    return value


def render_csv(report: Report) -> str:
    """One CSV row per ``--group-by`` group plus a ``(total)`` row; header :data:`CSV_COLUMNS`.

    Money (the ``*_usd`` columns, US dollars) is the JSON's decimal string (see
    :meth:`~.report.Report.to_dict`: 6 places, ``0.000045``, never ``4.5e-05``); rates are
    fractions 0..1 rounded to 6 decimals, also in plain notation; empty cells mean "not
    applicable" (no input).
    ``priced_as`` names the stand-in price rows behind the costs (the proxy's ``price_as``), as
    ``model=stand-in`` joined by ``; ``: every pair on the ``(total)`` row, the group's own
    pair on ``--group-by model`` rows, empty otherwise. Text cells that a spreadsheet would
    evaluate as a formula are neutralised (see :func:`csv_cell`). ``since`` and ``until`` are
    the report's window ``[since, until)`` in unix seconds, exactly as the figures cover it.
    """
    stand_ins = {p.model: p.priced_as for p in report.priced_as}
    lines = [_csv_line(CSV_COLUMNS)]
    for s in (*report.groups, report.total):
        values = [getattr(s, column) for column in CSV_COLUMNS[:-3]]
        if s is report.total:
            values[0] = "(total)"
            pairs = list(stand_ins.items())
        else:
            values[0] = s.group
            by_model = report.group_by == "model" and s.group in stand_ins
            pairs = [(s.group, stand_ins[s.group])] if by_model else []
        values.append("; ".join(f"{model or '(no model)'}={rates}" for model, rates in pairs))
        values += [report.since, report.until]
        cells = [
            usd_text(v) if column.endswith("_usd") and isinstance(v, float) else csv_cell(v)
            for column, v in zip(CSV_COLUMNS, values, strict=True)
        ]
        lines.append(_csv_line(cells))
    return "".join(lines)


def _csv_line(cells: Sequence[object]) -> str:
    """One CSV record ending in ``\n``, with every cell that holds a CR or LF quoted.

    The writer quotes a cell holding a character of its line terminator; with ``\n`` alone a
    lone ``\r`` went out unquoted, and a reader or a spreadsheet starts a new row there
    (``x\r=1+1`` would begin a row with a formula). So the writer ends the record with
    ``\r\n`` and the record is then ended with ``\n``.
    """
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(cells)
    return buffer.getvalue()[:-2] + "\n"
