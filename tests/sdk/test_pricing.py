"""Price table sanity (documented multipliers), model-name matching and cost arithmetic."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptcache.errors import ConfigError, PricingError, UnknownModelPriceError
from promptcache.pricing import (
    COST_TERMS,
    ModelPrice,
    PriceTable,
    cost,
    default_price_table,
    load_price_table,
    lookup_price,
)
from promptcache.usage import Usage

TABLE = default_price_table()
ROWS = sorted(TABLE.models)

# Multipliers as documented in shared/reference/vendor-caching.md (checked 2026-11-30).
DOCUMENTED = {
    "anthropic": ("0.1", "1.25", "2"),
    "openai-gpt5": ("0.1", "1", "1"),
    "openai-gpt5-6": ("0.1", "1.25", "1.25"),
    "openai-gpt4-1": ("0.25", "1", "1"),
    "openai-gpt4o": ("0.5", "1", "1"),
    "gemini": ("0.1", "1", "1"),
    "amazon-nova": ("0.25", "1", "1"),
}


def test_families_match_documented_multipliers() -> None:
    assert set(TABLE.families) == set(DOCUMENTED)
    for name, (read, w5, w1h) in DOCUMENTED.items():
        family = TABLE.families[name]
        assert (family.cache_read, family.cache_write_5m, family.cache_write_1h) == (
            Decimal(read),
            Decimal(w5),
            Decimal(w1h),
        ), name


@pytest.mark.parametrize("name", ROWS)
def test_row_ratios_follow_family_unless_annotated(name: str) -> None:
    row = TABLE.models[name]
    family = TABLE.families[row.family]
    ratios = (
        row.cache_read / row.input,
        row.cache_write_5m / row.input,
        row.cache_write_1h / row.input,
    )
    documented = (family.cache_read, family.cache_write_5m, family.cache_write_1h)
    if row.exception:  # an annotation must explain a real deviation, not a stale one
        assert ratios != documented, f"{name}: exception annotated but ratios match the family"
    else:
        assert ratios == documented, f"{name}: ratios {ratios} != family {documented}"


@pytest.mark.parametrize("name", ROWS)
def test_rows_are_sourced_and_dated(name: str) -> None:
    row = TABLE.models[name]
    assert row.source_url.startswith("https://")
    assert row.checked == "2026-11-30"
    assert row.output > 0 and row.input > 0


@pytest.mark.parametrize(
    ("model", "row"),
    [
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("Claude-Sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),  # exact row beats snapshot stripping
        ("gpt-5.6-terra-2026-09-15", "gpt-5.6-terra"),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5"),
        ("global.anthropic.claude-haiku-4-5-20251001-v1:0", "anthropic.claude-haiku-4-5"),
        ("amazon.nova-pro-v1:0", "amazon.nova-pro"),
    ],
)
def test_model_name_matching(model: str, row: str) -> None:
    price, warning = TABLE.match(model)
    assert price.model == row
    assert warning is None


def test_bedrock_id_without_row_falls_back_to_vendor_row_with_warning() -> None:
    price, warning = TABLE.match("us.anthropic.claude-sonnet-4-6-v1:0")
    assert price.model == "claude-sonnet-4-6"
    assert warning is not None and "anthropic" in warning


@pytest.mark.parametrize("model", ["gpt-4o-mini-transcribe", "claude-sonet-4-5", "llama-3-70b"])
def test_unknown_model_is_an_error_never_zero(model: str) -> None:
    with pytest.raises(UnknownModelPriceError) as info:
        cost(Usage(vendor="openai_chat", uncached_input_tokens=10), model)
    message = str(info.value)
    assert repr(model) in message and "rates=" in message and "--rates" in message
    assert isinstance(info.value, PricingError) and isinstance(info.value, KeyError)


def test_unknown_model_names_close_matches() -> None:
    with pytest.raises(UnknownModelPriceError, match="claude-sonnet-4-5"):
        lookup_price("claude-sonet-4-5")


def test_cost_arithmetic_per_term() -> None:
    usage = Usage(
        vendor="anthropic",
        uncached_input_tokens=1000,
        cache_read_tokens=10000,
        cache_write_5m_tokens=2000,
        cache_write_1h_tokens=500,
        cache_write_unknown_tokens=300,
        output_tokens=400,
    )
    result = cost(usage, "claude-sonnet-4-5-20250929")
    assert result.terms == {
        "uncached_input": Decimal("0.003"),
        "cache_read": Decimal("0.003"),
        "cache_write_5m": Decimal("0.0075"),
        "cache_write_1h": Decimal("0.003"),
        "cache_write_unknown": Decimal("0.001125"),
        "output": Decimal("0.006"),
    }
    assert list(result.terms) == list(COST_TERMS)
    assert result.total_usd == Decimal("0.023625")
    assert result.cost_without_cache_usd == Decimal("0.0474")
    assert result.savings_usd == Decimal("0.023775")
    assert result.price.model == "claude-sonnet-4-5"


def test_savings_negative_when_writes_are_not_read_back() -> None:
    usage = Usage(vendor="anthropic", cache_write_1h_tokens=10_000)
    result = cost(usage, "claude-haiku-4-5")
    assert result.total_usd == Decimal("0.02")
    assert result.cost_without_cache_usd == Decimal("0.01")
    assert result.savings_usd == Decimal("-0.01")


def test_user_rates_price_an_unknown_model() -> None:
    rates = ModelPrice(
        model="my-llm",
        input=1,  # type: ignore[arg-type]  # ints, floats and strings are converted exactly
        output=0.3,  # type: ignore[arg-type]
        cache_read="0.1",  # type: ignore[arg-type]
        cache_write_5m=Decimal("1.25"),
        cache_write_1h=Decimal("2"),
    )
    assert rates.output == Decimal("0.3")
    result = cost(Usage(vendor="openai_chat", cache_read_tokens=1_000_000), "my-llm", rates=rates)
    assert result.total_usd == Decimal("0.1")


def test_bad_user_rates_are_rejected() -> None:
    with pytest.raises(ConfigError):
        ModelPrice(
            model="x",
            input=Decimal(-1),
            output=Decimal(1),
            cache_read=Decimal(0),
            cache_write_5m=Decimal(0),
            cache_write_1h=Decimal(0),
        )
    with pytest.raises(ConfigError):
        ModelPrice(
            model="x",
            input=Decimal("NaN"),
            output=Decimal(1),
            cache_read=Decimal(0),
            cache_write_5m=Decimal(0),
            cache_write_1h=Decimal(0),
        )


def test_aliases_given_as_one_string_are_refused() -> None:
    # aliases="my-llm-v2" was taken and read one character at a time, so the table priced
    # models named "m", "y", "l", "v", "2" and "-" at these rates (the alias itself only matched
    # through the "-v2" version suffix being dropped)
    with pytest.raises(
        ConfigError,
        match=r"^my-llm.aliases must be a list of names, got the string 'my-llm-v2'; pass a "
        r"list: aliases=\['my-llm-v2'\]$",
    ):
        ModelPrice("my-llm", 1, 1, 1, 1, 1, aliases="my-llm-v2")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"my-llm.aliases must be a list of names \(str\)"):
        ModelPrice("my-llm", 1, 1, 1, 1, 1, aliases=["ok", 7])  # type: ignore[list-item]
    row = ModelPrice("my-llm", 1, 1, 1, 1, 1, aliases=["my-llm-v2"])  # type: ignore[arg-type]
    assert row.aliases == ("my-llm-v2",)
    assert PriceTable({"my-llm": row}).match("my-llm-v2") == (row, None)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"tier_max_input_tokens": "200000"}, r"x.tier_max_input_tokens must be a positive"),
        ({"tier_max_input_tokens": -5}, r"x.tier_max_input_tokens must be a positive integer"),
        ({"tier_max_input_tokens": 5, "above_tier": {"input": 2}}, r"above_tier must be a Model"),
        (
            {
                "tier_max_input_tokens": 5,
                "above_tier": ModelPrice("y", 2, 2, 2, 2, 2, tier_max_input_tokens=9),
            },
            r"x.above_tier cannot itself be tiered",
        ),
    ],
)
def test_a_bad_tier_in_model_price_is_refused_when_built(
    extra: dict[str, Any], message: str
) -> None:
    """ModelPrice built by hand took a tier of '200000' or an above_tier dict, and cost() then
    failed with TypeError ('>' not supported between int and str) or AttributeError ('dict'
    object has no attribute 'rate'); a negative tier priced every request above it."""
    with pytest.raises(ConfigError, match=message):
        ModelPrice("x", 1, 1, 1, 1, 1, **extra)
    with pytest.raises(ConfigError, match=r"needs the model name \(str\), got int"):
        ModelPrice(5, 1, 1, 1, 1, 1)  # type: ignore[arg-type]


def test_tiered_row_without_above_tier_rates_warns_underestimate() -> None:
    big = Usage(vendor="gemini", uncached_input_tokens=250_000)
    result = cost(big, "gemini-3-pro-preview")
    assert any("underestimate" in w for w in result.warnings)
    assert not result.above_tier
    small = Usage(vendor="gemini", uncached_input_tokens=150_000)
    assert cost(small, "gemini-3-pro-preview").warnings == ()


def _anthropic_request(total_input: int) -> Usage:
    """``total_input`` tokens of which 150k cache reads, 20k 5m and 10k 1h writes; 1k output."""
    return Usage.from_anthropic(
        {
            "input_tokens": total_input - 180_000,
            "cache_read_input_tokens": 150_000,
            "cache_creation_input_tokens": 30_000,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 20_000,
                "ephemeral_1h_input_tokens": 10_000,
            },
            "output_tokens": 1_000,
        }
    )


# Independent invoice arithmetic, rates from the pricing page's long-context table (checked
# 2026-12-01): up to 200K input $3 in / $3.75 5m write / $6 1h write / $0.30 read / $15 out;
# over 200K $6 / $7.50 / $12 / $0.60 / $22.50, on every token of the request.
#   199,999: 19,999x3 + 150,000x0.3 + 20,000x3.75 + 10,000x6 + 1,000x15 = 254,997 (/1e6)
#   200,000: 20,000x3 + 45,000 + 75,000 + 60,000 + 15,000              = 255,000
#   200,001: 20,001x6 + 150,000x0.6 + 20,000x7.5 + 10,000x12 + 1,000x22.5 = 502,506
@pytest.mark.parametrize(
    ("total_input", "above", "usd", "uncached_usd", "output_usd"),
    [
        (199_999, False, "0.254997", "0.059997", "0.015"),
        (200_000, False, "0.255", "0.06", "0.015"),
        (200_001, True, "0.502506", "0.120006", "0.0225"),
    ],
)
def test_sonnet_long_context_tier_boundary_prices_every_token(
    total_input: int, above: bool, usd: str, uncached_usd: str, output_usd: str
) -> None:
    usage = _anthropic_request(total_input)
    assert usage.total_input_tokens == total_input  # cache reads and writes count
    for model in ("claude-sonnet-4-5-20250929", "claude-sonnet-4"):
        result = cost(usage, model)
        assert result.above_tier is above
        assert result.total_usd == Decimal(usd)
        assert result.terms["uncached_input"] == Decimal(uncached_usd)
        assert result.terms["output"] == Decimal(output_usd)
        assert result.warnings == ()
    data = cost(usage, "claude-sonnet-4-5").to_dict()
    assert data["above_tier"] is above and data["tier_max_input_tokens"] == 200_000
    assert data["terms"]["cache_write_1h"]["rate_usd_per_mtok"] == ("12" if above else "6")
    assert Decimal(data["total_usd"]) == Decimal(usd)


def test_cache_reads_alone_can_cross_the_tier() -> None:
    usage = Usage(vendor="anthropic", uncached_input_tokens=1, cache_read_tokens=200_000)
    result = cost(usage, "claude-sonnet-4-5")
    assert result.above_tier
    # 1 x $6 + 200,000 x $0.60 = $120,006 per million
    assert result.total_usd == Decimal("0.120006")
    assert result.cost_without_cache_usd == Decimal("1.200006")  # 200,001 x $6


@pytest.mark.parametrize(
    ("total_input", "usd"),
    [
        # 84,000x0.10 + 10,000x0.01 + 5,000x0.125 + 1,000x0.20 + 500x0.50 = 9,575 (/1e6)
        (100_000, "0.009575"),
        # over 100K: 84,001x0.50 + 10,000x0.05 + 5,000x0.625 + 1,000x1 + 500x2.50 = 47,875.5
        (100_001, "0.0478755"),
    ],
)
def test_haiku_5_5_tier_at_100k(total_input: int, usd: str) -> None:
    usage = Usage(
        vendor="anthropic",
        uncached_input_tokens=total_input - 16_000,
        cache_read_tokens=10_000,
        cache_write_5m_tokens=5_000,
        cache_write_1h_tokens=1_000,
        output_tokens=500,
    )
    result = cost(usage, "claude-haiku-5-5")
    assert result.above_tier is (total_input > 100_000)
    assert result.total_usd == Decimal(usd)


@pytest.mark.parametrize(
    ("prompt", "above", "usd"),
    [
        # promptTokenCount includes cached tokens: 200,000 = 50,000 uncached + 150,000 cached.
        # 50,000x1.25 + 150,000x0.125 + 2,000x10 = 101,250 (/1e6)
        (200_000, False, "0.10125"),
        # 50,001x2.50 + 150,000x0.25 + 2,000x15 = 192,502.5
        (200_001, True, "0.1925025"),
    ],
)
def test_gemini_2_5_pro_tier_counts_cached_tokens(prompt: int, above: bool, usd: str) -> None:
    usage = Usage.from_gemini(
        {
            "promptTokenCount": prompt,
            "cachedContentTokenCount": 150_000,
            "candidatesTokenCount": 2_000,
        }
    )
    result = cost(usage, "gemini-2.5-pro")
    assert result.above_tier is above
    assert result.total_usd == Decimal(usd)


@pytest.mark.parametrize("name", [n for n in ROWS if TABLE.models[n].above_tier is not None])
def test_above_tier_rates_are_sourced_dated_and_follow_the_family(name: str) -> None:
    row = TABLE.models[name]
    above = row.above_tier
    assert above is not None and row.tier_max_input_tokens is not None
    assert above.source_url.startswith("https://") and above.checked == "2026-12-01"
    assert above.input > row.input and above.output > row.output
    family = TABLE.families[row.family]
    assert (above.cache_read, above.cache_write_5m, above.cache_write_1h) == (
        above.input * family.cache_read,
        above.input * family.cache_write_5m,
        above.input * family.cache_write_1h,
    )


def test_user_file_above_tier_derives_cache_rates_from_the_family(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        '[models.long]\nfamily = "anthropic"\ninput = 1\noutput = 5\n'
        "tier_max_input_tokens = 1000\n"
        '[models.long.above_tier]\ninput = 2\noutput = "7.5"\n',
        encoding="utf-8",
    )
    row = load_price_table(path).lookup("long")
    assert row.above_tier is not None
    assert row.above_tier.cache_write_1h == Decimal(4)
    usage = Usage(vendor="anthropic", uncached_input_tokens=1001, output_tokens=2)
    assert cost(usage, "long", rates=row).total_usd == Decimal("0.002017")  # 1001x2 + 2x7.5


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[models.x]\nfamily = "anthropic"\ninput = 1\noutput = 1\n'
         "[models.x.above_tier]\ninput = 2\noutput = 2\n", "needs tier_max_input_tokens"),
        ('[models.x]\nfamily = "anthropic"\ninput = 1\noutput = 1\n'
         'tier_max_input_tokens = 5\nabove_tier = "y"\n', "must be a table"),
    ],
)  # fmt: skip
def test_malformed_above_tier_is_a_config_error(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=match):
        load_price_table(path)


def test_usage_warnings_are_carried_into_the_breakdown() -> None:
    usage = Usage.from_anthropic({"input_tokens": 1, "cache_creation_input_tokens": 5})
    result = cost(usage, "claude-opus-4-5")
    assert result.warnings == usage.warnings
    assert result.terms["cache_write_unknown"] == Decimal(5) * Decimal("6.25") / 1_000_000


def test_to_dict_is_json_ready_and_lossless() -> None:
    usage = Usage(vendor="openai_chat", uncached_input_tokens=7, cache_read_tokens=3)
    data = json.loads(json.dumps(cost(usage, "gpt-5").to_dict()))
    assert Decimal(data["total_usd"]) == cost(usage, "gpt-5").total_usd
    assert data["terms"]["cache_read"] == {
        "tokens": 3,
        "rate_usd_per_mtok": "0.125",
        "usd": "0.000000375",
    }
    assert data["terms"]["cache_write_1h"]["usd"] == "0"


# -- user price files ---------------------------------------------------------------------------


def test_a_user_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('[models."caf\u00e9"]\ninput = 1\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"price table .*latin1\.toml is not UTF-8 text"):
        load_price_table(path)


def test_user_file_overrides_and_derives_cache_rates(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        '[models."my-claude-finetune"]\nfamily = "anthropic"\ninput = 4\noutput = "20"\n'
        '[models."claude-sonnet-4-5"]\ninput = "2"\noutput = "9"\ncache_read = "0.2"\n'
        'cache_write_5m = "2.5"\ncache_write_1h = "4"\nsource_url = "https://example.com/deal"\n',
        encoding="utf-8",
    )
    table = load_price_table(path).with_fallback(default_price_table())
    derived = table.lookup("my-claude-finetune")
    assert (derived.cache_read, derived.cache_write_5m, derived.cache_write_1h) == (
        Decimal("0.4"),
        Decimal("5.00"),
        Decimal("8"),
    )
    assert table.lookup("claude-sonnet-4-5-20250929").input == Decimal(2)  # user row wins
    assert table.lookup("gpt-5").input == Decimal("1.25")  # bundled rows still there


def test_gemini_2_0_flash_is_priced_by_its_version_name() -> None:
    """gemini-2.0-flash-001, the stable version Gemini 2.0 Flash is called by (and that
    Vertex requests name), had no row: cost() raised and the proxy left its requests unpriced."""
    table = default_price_table()
    for name in ("gemini-2.0-flash-001", "models/gemini-2.0-flash-001"):
        assert table.lookup(name).model == "gemini-2.0-flash", name


def test_user_rows_win_by_every_name_they_give_or_replace(tmp_path: Path) -> None:
    """Names followed the bundled table: a user row replacing claude-sonnet-4 left its bundled
    alias claude-sonnet-4-0 unknown (UnknownModelPriceError where the bundled table priced it),
    and a user row aliased claude-sonnet-4-5 lost to the bundled row of that name, so the
    negotiated rates were silently not used."""
    path = tmp_path / "prices.toml"
    path.write_text(
        '[models."claude-sonnet-4"]\nfamily = "anthropic"\ninput = "2"\noutput = "10"\n'
        '[models."my-sonnet"]\nfamily = "anthropic"\ninput = "1.5"\noutput = "7"\n'
        'aliases = ["claude-sonnet-4-5"]\n',
        encoding="utf-8",
    )
    bundled = default_price_table()
    assert bundled.lookup("claude-sonnet-4-0").model == "claude-sonnet-4"
    table = load_price_table(path).with_fallback(bundled)
    assert table.lookup("claude-sonnet-4-0").input == Decimal(2)  # the replaced row's alias
    assert table.lookup("claude-sonnet-4").input == Decimal(2)
    for name in ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "CLAUDE-SONNET-4-5"):
        assert table.lookup(name).model == "my-sonnet", name
    assert table.lookup("us.anthropic.claude-sonnet-4-5-20250929-v1:0").model == (
        "anthropic.claude-sonnet-4-5"  # the Bedrock row is another price, still bundled
    )
    assert table.lookup("gpt-5").input == Decimal("1.25")  # bundled rows still there
    assert bundled.lookup("claude-sonnet-4-5").input == Decimal(3)  # the bundled table unchanged


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[models.x\n", "not valid TOML"),
        ('[models.x]\noutput = "1"\n', "missing input"),
        ('[models.x]\ninput = "1"\noutput = "1"\n', "no cache_read"),
        ('[models.x]\nfamily = "anthropic"\ninput = "-1"\noutput = "1"\n', "from 0 to 1000000"),
        ('[models.x]\nfamily = "anthropic"\ninput = "abc"\noutput = "1"\n', "number"),
        ('[models.x]\nfamily = "anthropic"\ninput = 1\noutput = 1\naliases = "y"\n', "aliases"),
        ("[families.f]\ncache_read = 0.1\n", "missing cache_write_5m"),
        # valid TOML that tomllib cannot read: it recurses once per level of nesting
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nests arrays or inline tables too deeply"),
    ],
)
def test_malformed_user_file_raises_config_error(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=match) as info:
        load_price_table(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        # a misspelt rate beside a family: the derived 1h rate (8) would replace the user's 3
        ('[models.x]\nfamily = "anthropic"\ninput = 4\noutput = 20\ncache_write_1hr = 3\n',
         r'\[models\."x"\] has unknown key\(s\) cache_write_1hr; allowed: family, input'),
        ('[models.x]\nfamily = "anthropic"\ninput = 4\noutput = 20\ntier_max_input_tokens = 9\n'
         "[models.x.above_tier]\ninput = 8\noutput = 40\ncache_reads = 1\n",
         r"above_tier has unknown key\(s\) cache_reads"),
        ("[families.f]\ncache_read = 0.1\ncache_write_5m = 1\ncache_write_1h = 2\nread = 1\n",
         r"\[families\.f\] has unknown key\(s\) read"),
        ('[model.x]\nfamily = "anthropic"\ninput = 4\noutput = 20\n',
         r"the price table has unknown key\(s\) model; allowed: families, models"),
    ],
)  # fmt: skip
def test_unknown_keys_in_a_user_file_are_config_errors(
    tmp_path: Path, text: str, match: str
) -> None:
    path = tmp_path / "typo.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=match) as info:
        load_price_table(path)
    assert str(path) in str(info.value)


def test_missing_user_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_price_table(tmp_path / "nope.toml")


# -- properties -----------------------------------------------------------------------------

tokens = st.integers(min_value=0, max_value=10_000_000)


@given(
    st.sampled_from(ROWS),
    st.tuples(tokens, tokens, tokens, tokens, tokens, tokens),
)
def test_total_is_sum_of_terms_and_savings_identity(name: str, counts: tuple[int, ...]) -> None:
    uncached, read, w5, w1h, unknown, output = counts
    usage = Usage(
        vendor="anthropic",
        uncached_input_tokens=uncached,
        cache_read_tokens=read,
        cache_write_5m_tokens=w5,
        cache_write_1h_tokens=w1h,
        cache_write_unknown_tokens=unknown,
        output_tokens=output,
    )
    result = cost(usage, name)
    assert result.total_usd == sum(result.terms.values())
    assert result.savings_usd == result.cost_without_cache_usd - result.total_usd
    if read == w5 == w1h == unknown == 0:
        assert result.savings_usd == 0
    if w5 == w1h == unknown == 0:  # reads never cost more than plain input
        assert result.savings_usd >= 0
