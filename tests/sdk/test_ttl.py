"""TTL advisor: simulated cache lifetimes, break-even arithmetic and the recommendation."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptcache.errors import ConfigError, UnknownModelPriceError
from promptcache.pricing import ModelPrice
from promptcache.ttl import TTLWriteCounts, advise_ttl, advise_ttl_counts, write_counts

SONNET = "claude-sonnet-4-5"  # input 3, read 0.30, 5m write 3.75, 1h write 6 (USD/MTok)


def test_sparse_requests_recommend_no_cache() -> None:
    advice = advise_ttl([0, 4000, 8000], 10_000, SONNET)
    assert advice.recommendation == "none"
    assert advice.options["none"].cost_usd == Decimal("0.09")  # 3 x 10k x $3/MTok
    assert advice.options["5m"].cost_usd == Decimal("0.1125")  # 3 writes x 10k x $3.75/MTok
    assert advice.options["1h"].cost_usd == Decimal("0.18")
    assert advice.savings_usd == 0


def test_five_minute_entry_is_refreshed_by_each_hit() -> None:
    # Gaps of 4 minutes: each hit refreshes the 5m entry, so one write serves all 10 requests.
    advice = advise_ttl([i * 240 for i in range(10)], 10_000, SONNET)
    five = advice.options["5m"]
    assert (five.num_writes, five.num_reads) == (1, 9)
    assert five.cost_usd == Decimal("0.0375") + 9 * Decimal("0.003")
    assert advice.recommendation == "5m"


def test_one_hour_entry_is_not_extended_by_hits() -> None:
    # Every 10 minutes for 2 hours: 5m always misses; 1h writes at 0 s, 3600 s and 7200 s.
    advice = advise_ttl([i * 600 for i in range(13)], 10_000, SONNET)
    assert (advice.options["5m"].num_writes, advice.options["5m"].num_reads) == (13, 0)
    assert (advice.options["1h"].num_writes, advice.options["1h"].num_reads) == (3, 10)
    assert advice.recommendation == "1h"
    assert advice.options["1h"].cost_usd == 3 * Decimal("0.06") + 10 * Decimal("0.003")


def test_request_at_exact_expiry_is_a_miss() -> None:
    advice = advise_ttl([0, 300], 1000, SONNET)
    assert advice.options["5m"].num_writes == 2


def test_timestamps_need_not_be_sorted() -> None:
    a = advise_ttl([0, 100, 200, 5000], 2048, SONNET)
    b = advise_ttl([5000, 200, 0, 100], 2048, SONNET)
    assert a == b


def test_below_minimum_prefix_forces_none_with_note() -> None:
    advice = advise_ttl([i * 10 for i in range(50)], 800, SONNET, min_cacheable_tokens=1024)
    assert advice.recommendation == "none"
    assert "minimum" in advice.note and "minimum" in advice.explain()


def test_explain_shows_the_arithmetic() -> None:
    text = advise_ttl([i * 240 for i in range(10)], 10_000, SONNET).explain()
    assert "1 write x 10,000 tokens x $3.75/MTok + 9 reads x 10,000 tokens x $0.30/MTok" in text
    assert "= $0.064500" in text
    assert "pays off after 0.28 reads" in text  # (3.75 - 3) / (3 - 0.30)
    assert "pays off after 1.11 reads" in text  # (6 - 3) / (3 - 0.30)
    assert "recommendation: 5m" in text


def test_explicit_rates_and_no_read_discount() -> None:
    flat = ModelPrice(
        model="flat",
        input=Decimal(1),
        output=Decimal(1),
        cache_read=Decimal(1),
        cache_write_5m=Decimal(1),
        cache_write_1h=Decimal(1),
    )
    advice = advise_ttl([0, 1, 2], 1000, rates=flat)
    assert advice.recommendation == "none"  # ties go to the simpler option
    assert "never pays" in advice.explain()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"timestamps": [], "prefix_tokens": 10, "model": SONNET}, ConfigError),
        ({"timestamps": [float("nan")], "prefix_tokens": 10, "model": SONNET}, ConfigError),
        ({"timestamps": [0.0], "prefix_tokens": -1, "model": SONNET}, ConfigError),
        ({"timestamps": [0.0], "prefix_tokens": 10**30, "model": SONNET}, ConfigError),
        ({"timestamps": [0.0], "prefix_tokens": 10}, ConfigError),
        (
            {"timestamps": [0.0], "prefix_tokens": 10, "model": "no-such-model"},
            UnknownModelPriceError,
        ),
    ],
)
def test_bad_input(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        advise_ttl(**kwargs)  # type: ignore[arg-type]


@given(
    st.lists(st.floats(min_value=0, max_value=20_000, allow_nan=False), min_size=1, max_size=60),
    st.integers(min_value=0, max_value=200_000),
)
def test_simulation_invariants(times: list[float], prefix: int) -> None:
    advice = advise_ttl(times, prefix, SONNET)
    for option in advice.options.values():
        assert option.num_writes + option.num_reads == len(times)
        assert option.num_writes >= 1
    none = advice.options["none"]
    assert none.num_reads == 0
    assert none.cost_usd == len(times) * Decimal(prefix) * Decimal(3) / 1_000_000
    best = advice.options[advice.recommendation].cost_usd
    assert all(best <= option.cost_usd for option in advice.options.values())


def test_write_counts_of_gaps_on_the_boundaries() -> None:
    # 5m: a write at 0, reads at 299.9 and 599.8 (each refreshes), a write at 899.8 (300 later)
    # 1h: a write at 0, reads until 3600, where 3600.0 itself writes again
    counts = write_counts([0, 299.9, 599.8, 899.8, 3600.0, 3600.5])
    assert counts == TTLWriteCounts(6, 3, 2, 3600.5)


@given(
    st.lists(st.floats(min_value=0, max_value=20_000, allow_nan=False), min_size=1, max_size=60),
    st.integers(min_value=0, max_value=200_000),
    st.sampled_from([None, 1024, 4096]),
)
def test_advice_from_counts_equals_advice_from_times(
    times: list[float], prefix: int, minimum: int | None
) -> None:
    counts = write_counts(times)
    # independent counts: 5m writes are the first request and each gap of 300 s or more
    ordered = sorted(times)
    gaps = sum(1 for a, b in itertools.pairwise(ordered) if b >= a + 300)
    assert counts.writes_5m == 1 + gaps
    assert counts.num_requests == len(times)
    by_counts = advise_ttl_counts(counts, prefix, SONNET, min_cacheable_tokens=minimum)
    assert by_counts == advise_ttl(times, prefix, SONNET, min_cacheable_tokens=minimum)


@pytest.mark.parametrize(
    "counts",
    [
        TTLWriteCounts(0, 1, 1, 0.0),
        TTLWriteCounts(3, 0, 1, 10.0),
        TTLWriteCounts(3, 1, 4, 10.0),
        TTLWriteCounts(3, 1, 1, -1.0),
        TTLWriteCounts(3, 1, 1, float("inf")),
    ],
)
def test_bad_counts(counts: TTLWriteCounts) -> None:
    with pytest.raises(ConfigError):
        advise_ttl_counts(counts, 1000, SONNET)


def test_timestamps_from_a_generator_or_a_set_give_the_list_s_advice() -> None:
    # a generator was used up by the argument checks and ended in IndexError
    stamps = [i * 600.0 for i in range(13)]
    expected = advise_ttl(stamps, 10_000, "claude-sonnet-4-5")
    assert expected.recommendation == "1h"
    from_generator = advise_ttl((s for s in stamps), 10_000, "claude-sonnet-4-5")
    assert from_generator == expected
    assert advise_ttl(set(stamps), 10_000, "claude-sonnet-4-5") == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_cacheable_tokens": -1}, "min_cacheable_tokens must be an int >= 0 or None, got -1"),
        # a str was a TypeError from the comparison
        ({"min_cacheable_tokens": "1024"}, "min_cacheable_tokens must be an int >= 0 or None"),
        # a dict of rates was an AttributeError
        ({"rates": {"input": 3}}, r"advise_ttl\(rates=\.\.\.\) needs a promptcache\.ModelPrice"),
    ],
)
def test_bad_minimum_and_rates_are_config_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        advise_ttl([0.0, 60.0], 10_000, "claude-sonnet-4-5", **options)  # type: ignore[arg-type]
    below = advise_ttl([0.0, 60.0], 10_000, "claude-sonnet-4-5", min_cacheable_tokens=20_000)
    assert below.recommendation == "none"


def test_explain_counts_in_the_singular_and_a_free_write_needs_no_read() -> None:
    """GPT-5 writes cost the input rate: 'pays off after 0.00 reads (1 before the entry
    expires)' said both that no read and that one read was needed; '1 writes', '1 requests'."""
    text = advise_ttl([0.0], 1, "gpt-5").explain()
    assert "prefix of 1 token, 1 request over" in text
    assert "5m:   1 write x 1 token x $1.25/MTok + 0 reads x 1 token x $0.125/MTok" in text
    assert (
        "a write costs no more than input and a read saves $1.125/MTok, so a write pays "
        "off from its first read" in text
    )
    assert "0.00 reads" not in text and "1 writes" not in text


def test_a_prefix_above_the_long_context_tier_is_priced_at_the_higher_rates() -> None:
    """A 300,000-token Sonnet 4.5 prefix puts every request above the 200,000-token tier, which
    bills at $6 input / $0.60 read / $7.50 5m write / $12 1h write per MTok; the advisor priced
    it at the base rates ($3 ...), half of every figure it printed."""
    advice = advise_ttl([0, 60, 120], 300_000, SONNET)
    assert advice.options["none"].cost_usd == Decimal("5.4")  # 3 x 300k x $6/MTok
    assert advice.options["5m"].cost_usd == Decimal("2.61")  # 300k x (7.50 + 2 x 0.60) / 1M
    assert advice.options["1h"].cost_usd == Decimal("3.96")  # 300k x (12 + 2 x 0.60) / 1M
    assert advice.savings_usd == Decimal("2.79")
    text = advice.explain()
    assert text.startswith(f"TTL advice for {SONNET}: prefix of 300,000 tokens")
    assert "input 6, cache read 0.60, 5m write 7.50, 1h write 12" in text
    assert "exceeds the 200,000-token tier" in advice.note and advice.note in text
    # at the tier itself the base rates hold, as cost() prices one request
    assert advise_ttl([0], 200_000, SONNET).options["none"].cost_usd == Decimal("0.6")
    # a tiered row without above-tier rates says its figures are an underestimate
    flat = ModelPrice("tiered", 1, 1, Decimal("0.1"), 1, 1, tier_max_input_tokens=10)
    assert "underestimate" in advise_ttl([0, 1], 11, rates=flat).note
    assert advise_ttl([0, 1], 10, rates=flat).note == ""


def test_explain_shows_amounts_under_a_millionth_of_a_dollar() -> None:
    """A 1-token prefix on gpt-5-nano: every option printed as '= $0.000000' and the advice as
    'saves $0.000000', though the options differ; each amount is now shown exactly."""
    text = advise_ttl([0, 60, 120], 1, "gpt-5-nano").explain()
    assert "none: 3 uncached x 1 token x $0.05/MTok = $0.00000015" in text
    assert "= $0.00000006" in text  # 1 x $0.05 + 2 x $0.005 per MTok
    assert "recommendation: 5m ($0.00000006, saves $0.00000009 against no caching)" in text
    assert "$0.000000 " not in text and "$0.000000)" not in text


def test_advice_for_a_model_without_a_ttl_choice_says_so() -> None:
    """advise_ttl(..., "gpt-5") recommended '1h', a TTL OpenAI has no setting for, without a
    word; the advice says the choice exists only for Claude. A Claude row, and a user's row of
    no family, get no such note."""
    starts = [0, 600, 1200]
    for model in ("gpt-5", "gemini-2.5-flash", "amazon.nova-pro"):
        advice = advise_ttl(starts, 10_000, model)
        assert "offers no 5m/1h TTL to choose" in advice.note, model
        assert advice.note in advice.explain()
    assert advise_ttl(starts, 10_000, "claude-sonnet-4-5").note == ""
    assert advise_ttl(starts, 10_000, "anthropic.claude-sonnet-4-5").note == ""
    mine = ModelPrice("acme-1", 2, 8, "0.2", "2.5", 4)
    assert advise_ttl(starts, 10_000, rates=mine).note == ""


def test_an_unknown_model_names_the_rates_argument_of_the_call_that_raised() -> None:
    # advise_ttl takes rates= as cost() does: the error must not send its caller to cost()
    with pytest.raises(UnknownModelPriceError) as raised:
        advise_ttl([0, 10], 5000, "my-finetune")
    assert "rates=ModelPrice(...) to cost() or advise_ttl()" in str(raised.value)
    mine = ModelPrice(model="my-finetune", input=Decimal("3"), output=Decimal("15"),
                      cache_read=Decimal("0.3"), cache_write_5m=Decimal("3.75"),
                      cache_write_1h=Decimal("6"))  # fmt: skip
    assert advise_ttl([0, 10], 5000, "my-finetune", rates=mine).recommendation == "5m"
