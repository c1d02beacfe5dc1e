"""`promptcache cost`: bare usage or whole bodies, auto-detection, rates files, clean errors."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import COMMANDS, cli
from promptcache.commands.cost import API_CHOICES
from promptcache.usage import VENDOR_APIS

VENDORS = Path(__file__).resolve().parents[1] / "data" / "vendors"


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["cost", *args], input=stdin)
    assert "Traceback" not in result.output + result.stderr
    return result.exit_code, result.stdout, result.stderr


def test_registered_and_choices_match_usage_module() -> None:
    assert COMMANDS["cost"] == "promptcache.commands.cost:cost_command"
    assert API_CHOICES == VENDOR_APIS


def test_whole_body_table_output() -> None:
    path = VENDORS / "anthropic" / "cache_read_and_write_5m.json"
    code, out, err = run(str(path), "--model", "claude-haiku-4-5-20251001")
    assert code == 0, err
    for term in ("uncached_input", "cache_read", "cache_write_5m", "cache_write_1h", "output"):
        assert term in out
    assert "10,240" in out and "0.006216" in out  # cache read tokens, total USD
    assert "cost without cache: $0.014920" in out
    assert "savings:            $0.008704" in out
    assert err == ""


@pytest.mark.parametrize(
    ("api", "case", "model"),
    [
        ("openai_chat", "cached", "gpt-4o-2024-08-06"),
        ("openai_responses", "reasoning", "gpt-5-2025-08-07"),
        ("gemini", "implicit_cache_thinking", "gemini-2.5-flash"),
        ("bedrock_converse", "cache_write_1h", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ("openai_completions", "cached", "gpt-4o"),
    ],
)
def test_json_output_detects_api_from_body(api: str, case: str, model: str) -> None:
    code, out, err = run(str(VENDORS / api / f"{case}.json"), "--model", model, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["api"] == api
    total = sum(Decimal(term["usd"]) for term in data["terms"].values())
    assert Decimal(data["total_usd"]) == total
    assert Decimal(data["savings_usd"]) == Decimal(data["cost_without_cache_usd"]) - total


def test_bare_usage_from_stdin() -> None:
    usage = {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "prompt_tokens_details": {"cached_tokens": 1920},
    }
    code, out, _ = run("-", "--model", "gpt-4o", "--format", "json", stdin=json.dumps(usage))
    assert code == 0
    data = json.loads(out)
    assert data["terms"]["cache_read"]["tokens"] == 1920
    assert data["terms"]["uncached_input"]["tokens"] == 86


def test_amounts_under_a_millionth_of_a_dollar_are_shown_not_rounded_to_zero() -> None:
    """10 tokens on gpt-5-nano cost $0.000000495: the table printed every amount as 0.000000
    and 'savings: $0.000000 (45.0% of the uncached cost)'; each amount is now exact."""
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": 9},
    }
    code, out, err = run("-", "--model", "gpt-5-nano", stdin=json.dumps(usage))
    assert code == 0, err
    # 1 x $0.05 + 9 x $0.005 + 1 x $0.40 per MTok; without cache 10 x $0.05 + 1 x $0.40
    assert "0.000000050" in out and "0.000000045" in out and "0.000000400" in out
    assert "0.000000495" in out
    assert "cost without cache: $0.000000900" in out
    assert "savings:            $0.000000405 (45.0% of the uncached cost)" in out
    assert "0.000000 " not in out and "0.000000\n" not in out


def test_no_input_tokens_has_no_hit_rate() -> None:
    """A response with output and no input (a bare {"input_tokens": 0, ...}) printed 'cache hit
    rate: 0.0%', a share of nothing; the table says there is none, and a response with input
    still gives its share."""
    usage = {"input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 5}
    code, out, err = run(
        "-", "-m", "claude-sonnet-4-5", "--api", "anthropic", stdin=json.dumps(usage)
    )
    assert code == 0, err
    assert "cache hit rate:     n/a (no input tokens)" in out
    assert "0.0%" not in out.split("cache hit rate:")[1]
    usage = {"input_tokens": 3, "cache_read_input_tokens": 1, "output_tokens": 5}
    code, out, err = run(
        "-", "-m", "claude-sonnet-4-5", "--api", "anthropic", stdin=json.dumps(usage)
    )
    assert code == 0, err
    assert "cache hit rate:     25.0%" in out


def test_a_request_above_the_tier_says_its_rates_are_the_above_tier_ones() -> None:
    """250,000 input tokens on claude-sonnet-4-5 were priced at $6/MTok, not the row's $3, and
    the table showed the 6 under the row's name without a word of why; a line says so now, and
    a request at the tier has none."""
    usage = {"input_tokens": 250_000, "output_tokens": 10}
    code, out, err = run(
        "-", "-m", "claude-sonnet-4-5", "--api", "anthropic", stdin=json.dumps(usage)
    )
    assert code == 0, err
    assert "1.500225" in out  # 250,000 x $6 + 10 x $22.50 per MTok
    assert (
        "long context:       250,000 input tokens exceed the row's 200,000-token tier, so every "
        "term is priced at its above-tier rates"
    ) in out
    usage = {"input_tokens": 200_000, "output_tokens": 10}
    code, out, err = run(
        "-", "-m", "claude-sonnet-4-5", "--api", "anthropic", stdin=json.dumps(usage)
    )
    assert code == 0, err
    assert "0.600150" in out and "long context" not in out


def test_ambiguous_usage_needs_api() -> None:
    usage = json.dumps({"input_tokens": 1000, "output_tokens": 10})
    code, _, err = run("-", "--model", "claude-sonnet-4-5", stdin=usage)
    assert code == 2 and err.startswith("error: ") and "--api" in err
    code, out, _ = run(
        "-", "-m", "claude-sonnet-4-5", "--api", "anthropic", "--format", "json", stdin=usage
    )
    assert code == 0 and json.loads(out)["total_usd"] == "0.00315"


def test_a_usage_of_no_known_vendor_names_the_api_option() -> None:
    # it said "pass the api explicitly, one of anthropic, ...", naming no option to pass it with
    code, out, err = run("-", "--model", "gpt-4o", stdin='{"tokens": 5}')
    assert code == 2 and out == ""
    assert err.startswith("error: cannot tell which vendor this usage comes from")
    assert "(--api or api=...), one of anthropic, openai_chat" in err


def test_negative_savings_and_warning_on_stderr() -> None:
    path = VENDORS / "anthropic" / "no_ttl_split.json"
    code, out, err = run(str(path), "--model", "claude-3-7-sonnet-20250219", "--format", "json")
    assert code == 0
    assert Decimal(json.loads(out)["savings_usd"]) < 0
    assert err.startswith("warning: ") and "TTL split" in err
    # the table's sign comes before the dollar sign, as the report prints it: -$0.01, not $-0.01
    code, table, _ = run(str(path), "--model", "claude-3-7-sonnet-20250219")
    assert code == 0
    savings = next(line for line in table.splitlines() if line.startswith("savings:"))
    assert savings.split()[1].startswith("-$") and "$-" not in table, table


def test_rates_file_prices_unknown_model(tmp_path: Path) -> None:
    rates = tmp_path / "rates.toml"
    rates.write_text(
        '[models."acme-1"]\nfamily = "anthropic"\ninput = 2\noutput = 8\n', encoding="utf-8"
    )
    usage = json.dumps(
        {"input_tokens": 0, "cache_read_input_tokens": 1_000_000, "output_tokens": 0}
    )
    code, out, err = run(
        "-",
        "-m",
        "acme-1",
        "--api",
        "anthropic",
        "--rates",
        str(rates),
        "--format",
        "json",
        stdin=usage,
    )
    assert code == 0, err
    assert json.loads(out)["total_usd"] == "0.2"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# my rates\n",
        "[models]\n",
        '[families.mine]\ncache_read = "0.1"\ncache_write_5m = "1.25"\ncache_write_1h = "2"\n',
    ],
)
def test_rates_file_without_rows_is_refused_like_a_minimums_file(tmp_path: Path, text: str) -> None:
    # an empty rates file priced with the bundled rows without a word
    rates = tmp_path / "rates.toml"
    rates.write_text(text, encoding="utf-8")
    usage = json.dumps({"input_tokens": 10, "output_tokens": 5})
    code, out, err = run(
        "-", "-m", "claude-sonnet-4-5", "--api", "anthropic", "--rates", str(rates), stdin=usage
    )
    assert code == 2 and out == ""
    assert f"price table {rates} has no rows" in err
    assert '[models."acme-1"] with input = "2", output = "8"' in err


def test_unknown_model_is_a_clean_error() -> None:
    path = VENDORS / "openai_chat" / "cached.json"
    code, out, err = run(str(path), "--model", "gpt-4o-turbo-x")
    assert code == 2 and out == ""
    assert err.startswith("error: no price for model 'gpt-4o-turbo-x'") and "--rates" in err


@pytest.mark.parametrize(
    ("stdin", "args", "message"),
    [
        ("{not json", [], "not valid JSON"),
        # an empty file said 'not valid JSON: Expecting value: line 1 column 1 (char 0)'
        ("", [], "the input is empty; expected a JSON object (a usage object or a response body)"),
        (" \n", [], "the input is empty; expected a JSON object"),
        ("[1, 2]", [], "expected a JSON object"),
        # a stream saved with curl -N, and JSON Lines: both were 'not valid JSON: ...'
        (
            'event: message_start\ndata: {"type": "message_start"}\n\n',
            [],
            "this is a streamed response (server-sent events), not one JSON object",
        ),
        ('{"a": 1}\n{"b": 2}\n', [], "more text after the first JSON value, at line 2 column 1"),
        ('{"usage": null, "type": "message"}', ["--api", "anthropic"], "no anthropic usage"),
        ('{"usage": {"input_tokens": 1}}', ["--api", "gemini"], "no gemini usage"),
        ('{"input_tokens": "many"}', ["--api", "anthropic"], "integer token count"),
    ],
)
def test_bad_input_is_a_clean_error(stdin: str, args: list[str], message: str) -> None:
    code, _, err = run("-", "-m", "claude-sonnet-4-5", *args, stdin=stdin)
    assert code == 2
    assert message in err


def test_rates_file_errors_are_clean(tmp_path: Path) -> None:
    rates = tmp_path / "rates.toml"
    rates.write_text("[models.x\n", encoding="utf-8")
    code, _, err = run("-", "-m", "x", "--rates", str(rates), stdin='{"prompt_tokens": 1}')
    assert code == 2 and "not valid TOML" in err


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input", '"1e400"'),  # a finite Decimal, and 400-digit dollar amounts
        ("input", '"1000000.01"'),
        ("output", '"inf"'),
        ("output", "nan"),
        ("cache_read", "-0.5"),
        ("input", "1e400"),  # TOML reads inf
    ],
)
def test_a_rate_out_of_range_is_an_error_naming_it(tmp_path: Path, field: str, value: str) -> None:
    rows = {"input": "2", "output": "8", "cache_read": "0.2"} | {field: value}
    rates = tmp_path / "rates.toml"
    body = "".join(f"{k} = {v}\n" for k, v in rows.items())
    rates.write_text(f'[models."acme-1"]\nfamily = "anthropic"\n{body}', encoding="utf-8")
    usage = '{"input_tokens": 1000, "output_tokens": 10}'
    code, out, err = run("-", "-m", "acme-1", "--api", "anthropic", "--rates", str(rates),
                         stdin=usage)  # fmt: skip
    assert code == 2 and out == ""
    assert err.startswith(f'error: {rates}: [models."acme-1"].{field} must be a finite number')
    assert len(err.strip().splitlines()) == 1


def test_the_highest_rate_allowed_prices_normally(tmp_path: Path) -> None:
    """The look-alike: $1 a token (1000000 per million) is accepted and priced exactly."""
    rates = tmp_path / "rates.toml"
    rates.write_text(
        '[models."acme-1"]\ninput = "1000000"\noutput = 0\ncache_read = 1\n'
        'cache_write_5m = 1\ncache_write_1h = "1000000"\n',
        encoding="utf-8",
    )
    usage = '{"input_tokens": 3, "output_tokens": 0}'
    code, out, err = run("-", "-m", "acme-1", "--api", "anthropic", "--rates", str(rates),
                         "--format", "json", stdin=usage)  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["total_usd"] == "3"


def test_a_misspelt_rate_in_a_rates_file_is_refused(tmp_path: Path) -> None:
    rates = tmp_path / "rates.toml"
    rates.write_text(
        '[models."acme-1"]\nfamily = "anthropic"\ninput = "2"\noutput = "8"\n'
        'cache_write_1hr = "3"\n',
        encoding="utf-8",
    )
    code, out, err = run("-", "-m", "acme-1", "--api", "anthropic", "--rates", str(rates),
                         stdin='{"input_tokens": 10, "output_tokens": 1}')  # fmt: skip
    assert code == 2 and out == ""
    assert err.startswith(f'error: {rates}: [models."acme-1"] has unknown key(s) cache_write_1hr')


def test_a_rates_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    rates = tmp_path / "c.toml"
    rates.write_bytes(b"\xff\xfe")
    code, _, err = run("-", "-m", "gpt-4o", "--rates", str(rates), stdin='{"prompt_tokens": 1}')
    assert code == 2
    assert f"price table {rates} is not UTF-8 text" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            "",
            "rates from row 'acme-1' of {rates} (the row gives no source_url and no checked date)",
        ),
        ('checked = "2026-12-01"\n', "rates from row 'acme-1' of {rates} (checked 2026-12-01; the"),
        ('source_url = "https://acme.example/prices"\n', "rates from https://acme.example/"),
    ],
)
def test_rates_without_a_date_or_source_say_so(tmp_path: Path, extra: str, line: str) -> None:
    rates = tmp_path / "rates.toml"
    rates.write_text(
        '[models."acme-1"]\nfamily = "anthropic"\ninput = 2\noutput = 8\n' + extra,
        encoding="utf-8",
    )
    usage = json.dumps({"input_tokens": 10, "output_tokens": 5})
    code, out, err = run(
        "-", "-m", "acme-1", "--api", "anthropic", "--rates", str(rates), stdin=usage
    )
    assert code == 0, err
    (shown,) = [ln for ln in out.splitlines() if ln.startswith("rates from")]
    assert shown.startswith(line.format(rates=rates))
    assert "(checked )" not in out and shown.count("(") == 1  # one parenthesis
    if "checked" in extra:
        assert shown.endswith("(checked 2026-12-01; the row gives no source_url)")
    elif "source_url" in extra:
        assert shown.endswith("prices (the row gives no checked date)")


@pytest.mark.parametrize("api", [[], ["--api", "anthropic"]])
def test_a_request_body_is_named_one_rather_than_asking_for_api(api: list[str]) -> None:
    # the request that was sent holds no token counts: the error asked for --api, and with
    # --api said the object did not look like anthropic's usage
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,  # a limit, not a count
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
    }
    code, _, err = run("-", "-m", "claude-sonnet-4-5", *api, stdin=json.dumps(body))
    assert code == 2
    assert "this is a request body (it has `messages`, `system`), not a response" in err
    assert "pass the api explicitly" not in err and "does not look like" not in err


def test_a_responses_body_echoing_instructions_and_tools_is_still_priced() -> None:
    # a Responses API response repeats the request's instructions and tools beside its usage
    body = {
        "object": "response",
        "instructions": "Be brief.",
        "tools": [],
        "output": [],
        "usage": {"input_tokens": 100, "output_tokens": 5, "total_tokens": 105},
    }
    code, out, _ = run("-", "-m", "gpt-5", stdin=json.dumps(body))
    assert code == 0 and "gpt-5 (openai_responses)" in out
