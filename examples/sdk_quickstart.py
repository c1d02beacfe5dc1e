"""promptcache SDK quickstart: a coding-assistant prompt that caches, and what caching saves.

Builds the classic layered prompt: about 10,000 frozen tokens (coding rules, a database DDL and
API docs, all generated deterministically below), a session layer (who the user is), and a
dynamic question. It renders the prompt for Anthropic and OpenAI, prints the per-segment
fingerprints, shows what a cache-breaking edit looks like, and prices 1,000 requests a day with
and without caching using ``promptcache.pricing.cost`` (Anthropic rates: 5-minute write 1.25x,
read 0.1x of input; https://platform.claude.com/docs/en/build-with-claude/prompt-caching ,
checked 2026-11-30).

Run it:  python examples/sdk_quickstart.py      (offline; no API key needed)
"""

from __future__ import annotations

from decimal import Decimal

from rich.console import Console
from rich.table import Table

from promptcache import (
    PromptBuilder,
    Usage,
    cost,
    first_divergence,
)

MODEL = "claude-sonnet-4-5"
REQUESTS_PER_DAY = 1_000
OUTPUT_TOKENS = 300  # a typical answer length for the question below

# -- deterministic frozen content ---------------------------------------------------------------

RULE_AREAS = {
    "Naming": ["modules", "classes", "functions", "constants", "test files", "CLI flags"],
    "Errors": ["user input", "network calls", "database writes", "file access", "parsing"],
    "Testing": ["pure functions", "HTTP handlers", "SQL queries", "migrations", "CLI commands"],
    "Logging": ["request handlers", "background jobs", "retries", "startup", "shutdown"],
    "Security": ["secrets", "SQL parameters", "file paths", "tokens", "uploads", "redirects"],
    "Performance": ["loops over rows", "N+1 queries", "caches", "pagination", "batch jobs"],
    "Style": ["imports", "docstrings", "type hints", "comments", "line length", "f-strings"],
    "Reviews": ["small diffs", "descriptions", "follow-ups", "approvals", "reverts"],
    "Dependencies": ["new packages", "version pins", "licences", "vendored code"],
    "Documentation": ["public APIs", "runbooks", "changelogs", "examples", "diagrams"],
}
RULE_TEMPLATES = [
    "For {topic}, prefer the simplest design that is obviously correct; explain any trade-off.",
    "When you change {topic}, add or update a test that fails without the change.",
    "Reject code touching {topic} that hides errors; raise a typed error naming the fix.",
]

TABLES = [
    "customers",
    "accounts",
    "invoices",
    "invoice_lines",
    "payments",
    "refunds",
    "products",
    "prices",
    "subscriptions",
    "plans",
    "coupons",
    "tax_rates",
    "addresses",
    "events",
    "webhooks",
    "api_keys",
    "audit_log",
    "users",
    "teams",
    "memberships",
    "usage_records",
    "credit_notes",
    "disputes",
    "payouts",
]
COLUMNS = [
    ("status", "TEXT NOT NULL"),
    ("amount_cents", "BIGINT NOT NULL"),
    ("currency", "CHAR(3) NOT NULL"),
    ("created_at", "TIMESTAMPTZ NOT NULL DEFAULT now()"),
    ("updated_at", "TIMESTAMPTZ"),
    ("metadata", "JSONB NOT NULL DEFAULT '{}'"),
    ("external_id", "TEXT UNIQUE"),
    ("deleted_at", "TIMESTAMPTZ"),
]

ENDPOINTS = ["list", "get", "create", "update", "delete", "search"]


def coding_rules() -> str:
    """About 3,150 tokens of house coding rules."""
    lines = []
    for area, topics in RULE_AREAS.items():
        lines.append(f"### {area}")
        n = 1
        for topic in topics:
            for template in RULE_TEMPLATES:
                lines.append(f"{area[0]}{n}. " + template.format(topic=topic))
                n += 1
        lines.append("")
    return "\n".join(lines)


def database_ddl() -> str:
    """About 2,700 tokens of PostgreSQL DDL for a billing database."""
    parts = []
    for i, table in enumerate(TABLES):
        parent = TABLES[i - 1] if i else None
        cols = ["    id BIGSERIAL PRIMARY KEY"]
        if parent:
            cols.append(f"    {parent[:-1]}_id BIGINT NOT NULL REFERENCES {parent}(id)")
        cols += [f"    {name} {kind}" for name, kind in COLUMNS[: 4 + i % 5]]
        parts.append(f"CREATE TABLE {table} (\n" + ",\n".join(cols) + "\n);")
        parts.append(f"CREATE INDEX {table}_created_at_idx ON {table} (created_at);")
        if parent:
            parts.append(
                f"CREATE INDEX {table}_{parent[:-1]}_id_idx ON {table} ({parent[:-1]}_id);"
            )
        parts.append(f"COMMENT ON TABLE {table} IS 'Billing {table.replace('_', ' ')}.';")
    return "\n".join(parts)


def api_docs() -> str:
    """About 3,900 tokens of REST API reference."""
    sections = []
    for table in TABLES[:19]:
        for verb in ENDPOINTS:
            method = {"list": "GET", "get": "GET", "create": "POST", "update": "PATCH"}.get(
                verb, "DELETE" if verb == "delete" else "POST"
            )
            path = f"/v1/{table}" + ("/{id}" if verb in ("get", "update", "delete") else "")
            path += "/search" if verb == "search" else ""
            sections.append(
                f"{method} {path}: {verb} {table.replace('_', ' ')}. Auth: bearer API key. "
                f"Errors: 400 invalid field, 404 unknown id, 429 rate limited."
            )
    return "\n".join(sections)


SQL_TOOL = {
    "type": "object",
    "properties": {
        "sql": {"type": "string", "description": "One read-only SELECT statement."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 500},
    },
    "required": ["sql"],
}
FILE_TOOL = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "Repository-relative path."}},
    "required": ["path"],
}


def build_prompt(question: str) -> PromptBuilder:
    """The layered coding-assistant prompt; only ``question`` changes between requests."""
    # The two tools alone (~100 tokens) are far below the model's 1024-token minimum, so a
    # breakpoint after them would be skipped with a warning: leave that location out.
    b = PromptBuilder(
        MODEL, cache_key="acme-billing-team", breakpoints=("frozen", "session", "history")
    )
    b.tool("run_sql", "Run a read-only SQL query against the billing replica.", SQL_TOOL)
    b.tool("read_file", "Read one file from the billing service repository.", FILE_TOOL)
    b.system("You are a senior engineer reviewing code for the Acme billing service.")
    b.rules(coding_rules(), title="House coding rules")
    b.knowledge(database_ddl(), title="billing database schema (PostgreSQL 16)")
    b.knowledge(api_docs(), title="billing REST API reference")
    b.session("The user is Ada Park, backend engineer on the invoicing team; she prefers SQL.")
    b.dynamic(question)
    return b


# -- the walk-through ---------------------------------------------------------------------------


def main() -> None:
    console = Console(width=110)
    question = "Why does listing invoices for one customer take 4 seconds?"
    builder = build_prompt(question)

    layers = builder.approx_tokens()
    table = Table(title="Prompt layers (approx. cl100k_base tokens)")
    table.add_column("layer")
    table.add_column("tokens", justify="right")
    for layer, tokens in layers.items():
        table.add_row(layer, f"{tokens:,}")
    console.print(table)
    console.print(f"frozen tokens: {layers['tools'] + layers['frozen']:,}")

    anthropic_params = builder.to_anthropic(max_tokens=1024)
    table = Table(title=f"Anthropic rendering: cache breakpoints ({MODEL})")
    for column in ("block", "location", "ttl", "prefix tokens"):
        table.add_column(column)
    for bp in anthropic_params.breakpoints:
        table.add_row(f"{bp.layer}[{bp.index}]", bp.label, bp.ttl, f"{bp.prefix_tokens:,}")
    console.print(table)
    for warning in anthropic_params.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")

    openai_params = builder.to_openai_chat()
    console.print(
        f"OpenAI rendering: {len(openai_params['messages'])} messages, "
        f"{len(openai_params['tools'])} tools, prompt_cache_key="
        f"{openai_params['prompt_cache_key']!r} (stable per team, never random)"
    )

    fp = builder.fingerprint("anthropic")
    table = Table(title="Fingerprints of the Anthropic request")
    for column in ("#", "segment", "kind", "chars", "sha256", "prefix hash"):
        table.add_column(column)
    for i, (segment, chained) in enumerate(zip(fp.segments, fp.chained, strict=True)):
        table.add_row(
            str(i),
            segment.path,
            segment.kind,
            f"{segment.num_chars:,}",
            segment.sha256[:12],
            chained[:12],
        )
    console.print(table)

    # Next request: a new question. Everything before it is byte-identical.
    next_fp = build_prompt("How do I add an index on invoices.customer_id?").fingerprint()
    change = first_divergence(fp, next_fp)
    assert change is not None
    console.print(
        f"next question: prefix shared for {change.index} of {len(fp.segments)} segments; "
        f"first change at {change.path}"
    )
    # A cache-breaking edit: someone puts today's date into the system prompt.
    broken = PromptBuilder(MODEL, breakpoints=("frozen", "session", "history"))
    broken.tool("run_sql", "Run a read-only SQL query against the billing replica.", SQL_TOOL)
    broken.tool("read_file", "Read one file from the billing service repository.", FILE_TOOL)
    broken.system(
        "You are a senior engineer reviewing code for the Acme billing service. "
        "Today is 2026-11-30."
    )
    broken_change = first_divergence(fp, broken.dynamic(question).fingerprint())
    assert broken_change is not None
    console.print(f"cache breaker found: {broken_change.describe()}")

    # Cost of a day. The prefix up to the last breakpoint the rendering carries (here the
    # session block's: every request comes from the same user) is written by the first request
    # and read by every later one (1,000 requests a day keep the 5-minute cache warm in busy
    # hours); whatever follows it (the question) bills as uncached input each time.
    cached = max(bp.prefix_tokens for bp in anthropic_params.breakpoints)
    uncached = sum(layers.values()) - cached
    first = cost(
        Usage(
            "anthropic",
            uncached_input_tokens=uncached,
            cache_write_5m_tokens=cached,
            output_tokens=OUTPUT_TOKENS,
        ),
        MODEL,
    )
    later = cost(
        Usage(
            "anthropic",
            uncached_input_tokens=uncached,
            cache_read_tokens=cached,
            output_tokens=OUTPUT_TOKENS,
        ),
        MODEL,
    )
    n_later = REQUESTS_PER_DAY - 1
    with_cache = first.total_usd + n_later * later.total_usd
    without_cache = first.cost_without_cache_usd + n_later * later.cost_without_cache_usd
    output_usd = first.terms["output"] + n_later * later.terms["output"]
    table = Table(title=f"{REQUESTS_PER_DAY:,} requests/day on {MODEL} (USD, list prices)")
    for column in ("term", "tokens/day", "without caching", "with caching"):
        table.add_column(column, justify="right")
    price = first.price
    rows = [
        ("cached prefix: write", cached, None, first.terms["cache_write_5m"]),
        ("cached prefix: reads", cached * n_later, None, n_later * later.terms["cache_read"]),
        (
            "prefix at input rate",
            cached * REQUESTS_PER_DAY,
            cached * REQUESTS_PER_DAY * price.input / 1_000_000,
            None,
        ),
        (
            "question (uncached)",
            uncached * REQUESTS_PER_DAY,
            uncached * REQUESTS_PER_DAY * price.input / 1_000_000,
            first.terms["uncached_input"] + n_later * later.terms["uncached_input"],
        ),
        ("output", OUTPUT_TOKENS * REQUESTS_PER_DAY, output_usd, output_usd),
    ]
    for term, tokens, without, with_ in rows:
        table.add_row(term, f"{tokens:,}", _usd(without), _usd(with_))
    table.add_row("total", "", _usd(without_cache), _usd(with_cache), style="bold")
    console.print(table)
    input_without = without_cache - output_usd
    input_with = with_cache - output_usd
    console.print(f"saving on input: {100 * (1 - input_with / input_without):.1f}%")
    console.print(
        f"saving in total: {100 * (1 - with_cache / without_cache):.1f}% "
        f"(${without_cache - with_cache:,.2f} per day)"
    )


def _usd(value: Decimal | None) -> str:
    return "" if value is None else f"${value:,.2f}"


if __name__ == "__main__":
    main()
