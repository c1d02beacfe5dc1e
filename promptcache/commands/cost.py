"""``promptcache cost``: price a vendor usage object (or a whole response body) for a model."""

from __future__ import annotations

import json
from typing import IO, Any

import click

from promptcache.commands._json_input import read_json_object
from promptcache.formatting import exact_places, percent, usd

#: Same names as promptcache.usage.VENDOR_APIS (kept here so --help imports nothing else;
#: tests/cli/test_cost.py checks they agree).
API_CHOICES = (
    "anthropic",
    "openai_chat",
    "openai_responses",
    "openai_completions",
    "gemini",
    "bedrock_converse",
)
_CONTAINERS = ("usage", "usageMetadata", "usage_metadata")
#: Top-level fields of a request body (what ``promptcache hash`` reads), which no usage object
#: or response body has.
_REQUEST_FIELDS = ("messages", "contents", "input", "instructions", "system", "prompt", "tools")


@click.command(name="cost")
@click.argument("usage_json", metavar="USAGE_JSON|-", type=click.File("r", encoding="utf-8-sig"))
@click.option("--model", "-m", required=True, help="Model name, e.g. claude-sonnet-4-5-20250929.")
@click.option(
    "--api",
    type=click.Choice(API_CHOICES),
    default=None,
    help="Wire format of the input; detected from the JSON when omitted.",
)
@click.option(
    "--rates",
    "rates_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="TOML price file (bundled format); its rows take precedence over the bundled table.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)
def cost_command(
    usage_json: IO[str], model: str, api: str | None, rates_file: str | None, output_format: str
) -> None:
    """Price a usage object or a whole response body: per-term cost, cost without cache, savings.

    Accepts the vendor's bare usage object (Anthropic/OpenAI `usage`, Gemini `usageMetadata`,
    Bedrock `usage`) or a whole non-streaming response body. Rates are USD per million tokens
    from the bundled, dated price table, or from --rates.

    \b
    Example:
        promptcache cost response.json --model claude-sonnet-4-5
        echo '{"prompt_tokens": 2006, "completion_tokens": 300,
               "prompt_tokens_details": {"cached_tokens": 1920}}' \\
          | promptcache cost - --model gpt-4o --format json
    """
    from promptcache.pricing import cost, default_price_table, load_price_table
    from promptcache.usage import Usage, detect_api, parse_usage

    payload = read_json_object(
        usage_json, param_hint="USAGE_JSON", what="a usage object or a response body"
    )
    counts = any(
        key.lower().endswith(("tokens", "tokencount", "token_count"))
        and not key.lower().startswith("max")  # a request's max_tokens is a limit, not a count
        for key in payload
    )
    request = [key for key in _REQUEST_FIELDS if key in payload]
    if request and not counts and not any(key in payload for key in _CONTAINERS):
        fields = ", ".join(f"`{key}`" for key in request)
        raise click.BadParameter(
            f"this is a request body (it has {fields}), not a response: it holds the prompt, "
            "not the token counts; price the usage object or the whole body of the response "
            "(`promptcache hash` fingerprints a request)",
            param_hint="USAGE_JSON",
        )
    api = api or detect_api(payload)
    if any(key in payload for key in _CONTAINERS):
        usage = parse_usage(api, payload)
        if usage is None:
            raise click.BadParameter(
                f"the response body has no {api} usage object (check --api; a streamed Chat "
                "request without stream_options.include_usage, or an error body, has none)",
                param_hint="USAGE_JSON",
            )
    else:
        usage = Usage.from_api(api, payload)
    table = default_price_table()
    if rates_file is not None:
        table = load_price_table(rates_file).with_fallback(table)
    breakdown = cost(usage, model, table=table)
    for warning in breakdown.warnings:
        click.echo(f"warning: {warning}", err=True)
    if output_format == "json":
        click.echo(json.dumps({"api": api, **breakdown.to_dict()}, indent=2))
    else:
        _print_table(breakdown.to_dict(), api, rates_file)


def _print_table(data: dict[str, Any], api: str, rates_file: str | None = None) -> None:
    from decimal import Decimal

    from rich.console import Console
    from rich.table import Table

    amounts = [row["usd"] for row in data["terms"].values()]
    amounts += [data["total_usd"], data["cost_without_cache_usd"], data["savings_usd"]]
    places = exact_places([Decimal(amount) for amount in amounts])
    table = Table(title=f"{data['model']} ({api}), price row {data['price_row']!r}")
    table.add_column("term")
    table.add_column("tokens", justify="right")
    table.add_column("USD / MTok", justify="right")
    table.add_column("USD", justify="right")
    for term, row in data["terms"].items():
        table.add_row(
            term, f"{row['tokens']:,}", row["rate_usd_per_mtok"], _usd(row["usd"], places)
        )
    table.add_section()
    table.add_row("total", "", "", _usd(data["total_usd"], places), style="bold")
    console = Console(highlight=False, soft_wrap=True)
    console.print(table)
    without = Decimal(data["cost_without_cache_usd"])
    savings = Decimal(data["savings_usd"])
    share = f" ({percent(savings / without)} of the uncached cost)" if without else ""
    console.print(f"cost without cache: {_usd(data['cost_without_cache_usd'], places, '$')}")
    console.print(f"savings:            {_usd(data['savings_usd'], places, '$')}{share}")
    # a hit rate is a share of the input: with no input tokens there is none to give
    total_input = sum(row["tokens"] for term, row in data["terms"].items() if term != "output")
    hit_rate = percent(data["hit_rate"]) if total_input else "n/a (no input tokens)"
    console.print(f"cache hit rate:     {hit_rate}")
    if data["above_tier"]:  # the rates above differ from the row's base rates: say why
        console.print(
            f"long context:       {total_input:,} input tokens exceed the row's "
            f"{data['tier_max_input_tokens']:,}-token tier, so every term is priced at its "
            "above-tier rates"
        )
    console.print(_rates_line(data["source_url"], data["checked"], data["price_row"], rates_file))


def _rates_line(source_url: str, checked: str, row: str, rates_file: str | None) -> str:
    """Where the rates came from and when they were checked. A row without ``source_url`` (only
    a user's rates file has one: every bundled row names its source) is named with its file;
    a missing ``source_url`` or ``checked`` date is said once, in one parenthesis."""
    source = source_url or f"row {row!r} of {rates_file or 'the user rates'}"
    missing = [
        key for key, value in (("source_url", source_url), ("checked date", checked)) if not value
    ]
    notes = [f"checked {checked}"] if checked else []
    if missing:
        notes.append(f"the row gives no {' and no '.join(missing)}")
    return f"rates from {source} ({'; '.join(notes)})"


def _usd(value: str, places: int, symbol: str = "") -> str:
    from decimal import Decimal

    return usd(Decimal(value), places, grouped=False, symbol=symbol, minus_first=True)
