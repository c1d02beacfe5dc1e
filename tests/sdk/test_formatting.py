"""promptcache.formatting: one rounding for every percentage printed, never "0%" for a share."""

from __future__ import annotations

from decimal import Decimal

import pytest

from promptcache.formatting import dollars, exact_places, percent, usd
from promptcache.proxy.report.advice import EngineKvStats, _engine


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0.0%"),
        (0.003, "0.3%"),
        (0.0004, "<0.1%"),
        (Decimal("0.00009"), "<0.1%"),
        (-0.0004, ">-0.1%"),
        (0.99996, ">99.9%"),
        (1, "100.0%"),
        (0.1234, "12.3%"),
        (None, "n/a"),
    ],
)
def test_a_share_that_is_not_zero_never_prints_as_zero(value: object, shown: str) -> None:
    assert percent(value) == shown  # type: ignore[arg-type]


def test_the_engine_advice_rounds_a_small_hit_rate_like_the_rest_of_the_report() -> None:
    kv = EngineKvStats(kv_usage=0.95, num_preemptions=3, num_swapped=0, prefix_cache_hit_rate=0.004)
    rec = _engine(kv)
    assert rec is not None
    assert "KV pool 95.0% full" in rec.message and "(hit rate 0.4%)" in rec.message
    assert "hit rate 0%" not in rec.message


def test_exact_places_keep_every_digit_of_an_amount() -> None:
    assert exact_places([Decimal("0.006216"), Decimal("0")]) == 6
    assert exact_places([Decimal("0.00000005"), Decimal("0.0024")]) == 8
    assert exact_places([Decimal("1.50"), Decimal("1E+2")]) == 6  # trailing zeros do not count
    assert exact_places([Decimal("0.1")], minimum=2) == 2


@pytest.mark.parametrize(
    ("value", "kwargs", "shown"),
    [
        (0.00015, {}, "$0.0002"),  # the float sits just below 0.00015; its text is the figure
        (Decimal("0.00025"), {}, "$0.0003"),  # half away from zero, not half-to-even's 0.0002
        (-0.00015, {"minus_first": True}, "-$0.0002"),
        (Decimal("-0.00025"), {}, "$-0.0003"),
        (-0.00001, {"minus_first": True}, "$0.0000"),  # rounds to zero: no sign
        (2.675, {"places": 2}, "$2.68"),  # float 2.675 is 2.67499999...
        # a difference of float sums: -0.0022499999999999985 is the exact -0.00225
        (0.01821 - 0.02046, {"minus_first": True}, "-$0.0023"),
        (0.0365 - 0.0115, {"places": 2}, "$0.03"),  # 0.024999999999999998 is 0.025
        (0.000049999, {}, "$0.0000"),  # a figure below the half stays below it
        (1.5e-11, {"places": 12}, "$0.000000000015"),  # places past FLOAT_PLACES: as given
        (1234.5, {}, "$1,234.5000"),
        (7, {"places": 2, "grouped": False, "symbol": ""}, "7.00"),
    ],
)
def test_usd_rounds_half_away_from_zero_on_the_decimal_figure(value, kwargs, shown) -> None:
    assert usd(value, **kwargs) == shown


def test_dollars_read_a_float_sum_as_the_amount_it_stands_for() -> None:
    assert dollars(0.01821 - 0.02046) == Decimal("-0.00225")  # -0.0022499999999999985
    assert dollars(0.1 + 0.2) == Decimal("0.3")  # 0.30000000000000004
    assert dollars(0.02046) > Decimal("0.02045") and not dollars(0.02046) > Decimal("0.02046")
    assert dollars(0.00000000875) == Decimal("0.0000000088")  # read to 10 places
    assert dollars(25) == Decimal(25)
    assert dollars(1e30) == Decimal("1E+30")  # too large for 10 places: as it is
    assert not dollars(float("nan")).is_finite() and dollars(float("inf")) == Decimal("Infinity")
