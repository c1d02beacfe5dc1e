"""How money, rates and counts are printed: every USD amount, percentage and counted noun the CLI,
report and demo show.

Only the standard library is imported here (the CLI's ``--help`` stays fast).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, getcontext
from typing import Final

__all__ = ["FLOAT_PLACES", "dollars", "exact_places", "percent", "plural", "usd"]

#: Decimal places a float amount of dollars is read to before :func:`usd` rounds it. The report
#: sums per-request costs as floats (SQLite REAL rollups), so its amounts carry binary noise in
#: their last bits (0.1 + 0.2 = 0.30000000000000004), which can put a half just below or above
#: itself. One addition of amounts under $100 adds at most 1.5e-14 of a dollar of noise, so a
#: sum of a few thousand stays under the 5e-11 that reading to 10 places drops; the figures
#: printed have 4 places (the report) or 6 (the JSON, the demo).
FLOAT_PLACES: Final = 10


def usd(
    value: Decimal | float,
    places: int = 4,
    *,
    grouped: bool = True,
    symbol: str = "$",
    minus_first: bool = False,
) -> str:
    """A dollar amount: ``usd(1234.5)`` -> ``"$1,234.5000"``.

    ``grouped``: thousands separators. ``symbol``: put before the number ("" for table cells
    whose header says USD). A negative amount reads ``"$-0.5000"``, or ``"-$0.5000"`` with
    ``minus_first``.

    A half rounds away from zero on the decimal value: ``usd(0.00015)`` -> ``"$0.0002"`` (the
    float's shortest text, ``"0.00015"``, is the figure rounded, not its binary value just
    below), and ``usd(Decimal("0.00025"))`` -> ``"$0.0003"`` (not half-to-even's 0.0002). A
    float is first read to :data:`FLOAT_PLACES` places (by its shortest text when ``places`` is
    that many or more), which drops the binary noise of a sum or difference of amounts: the
    report's cost without cache minus its cost, $0.01821 - $0.02046, is the float
    -0.0022499999999999985, and prints ``"-$0.0023"`` as the exact -0.00225 does.
    """
    amount = value if isinstance(value, Decimal) else dollars(value)
    if isinstance(value, float) and amount.is_finite() and places >= FLOAT_PLACES:
        amount = Decimal(str(value))  # as many places as asked for: the float's shortest text
    if amount.is_finite():
        amount = amount.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
        amount = amount if amount else amount.copy_abs()  # -0.00001 rounds to 0, unsigned
    spec = f"{',' if grouped else ''}.{places}f"
    if minus_first and amount < 0:
        return f"-{symbol}{-amount:{spec}}"
    return f"{symbol}{amount:{spec}}"


def dollars(value: float) -> Decimal:
    """The amount a float (or int) of dollars stands for, as a ``Decimal``: the float's shortest
    text read to :data:`FLOAT_PLACES` places, so a sum's binary noise is gone
    (``dollars(0.01821 - 0.02046)`` -> ``Decimal("-0.00225")``, not -0.0022499999999999985).
    Compare amounts summed as floats through it: ``dollars(cost) > Decimal("0.02046")`` is
    False for a cost that sums to 0.020460000000000002. ``inf`` and ``nan`` stay as they are,
    and so does an amount of $10**18 or more (too large for 10 places in the 28 digits of the
    default decimal context)."""
    if isinstance(value, int):
        return Decimal(int(value))
    amount = Decimal(str(value))
    if not amount.is_finite() or amount.adjusted() >= getcontext().prec - FLOAT_PLACES:
        return amount  # inf, nan, or an amount too large to hold 10 places
    return amount.quantize(Decimal(1).scaleb(-FLOAT_PLACES), rounding=ROUND_HALF_EVEN).normalize()


def exact_places(amounts: list[Decimal], minimum: int = 6) -> int:
    """Decimal places that print every one of ``amounts`` exactly, at least ``minimum``: one
    token at $0.05/MTok is $0.00000005, which 6 places would print as 0.000000. Give the same
    places to every amount of one table, so the column lines up."""
    exponents = [amount.normalize().as_tuple().exponent for amount in amounts]
    return max([minimum, *(-e for e in exponents if isinstance(e, int))])


def percent(value: float | Decimal | None, places: int = 1, *, missing: str = "n/a") -> str:
    """A fraction as a percentage: ``percent(0.1234)`` -> ``"12.3%"``; None -> ``missing``.

    A share that is not zero never prints as zero, and one short of the whole never as the
    whole: ``percent(0.0004)`` -> ``"<0.1%"``, ``percent(-0.0004)`` -> ``">-0.1%"``,
    ``percent(0.99996)`` -> ``">99.9%"``; 0 and 1 print as ``"0.0%"`` and ``"100.0%"``. Every
    percentage the CLI, the report and the demo print goes through here, at one place by
    default, so two shares side by side are rounded alike.
    """
    if value is None:
        return missing
    text = f"{value:.{places}%}"
    step = Decimal(1).scaleb(-places)  # the smallest non-zero share shown, in percent
    shown = Decimal(text.rstrip("%"))
    if value and not shown:
        return f"<{step}%" if value > 0 else f">-{step}%"
    if value != 1 and shown == 100 and value < 1:
        return f">{100 - step}%"
    return text


def plural(count: int, noun: str, *, grouped: bool = False) -> str:
    """A count and its noun: ``plural(1, "KV block")`` -> ``"1 KV block"``, ``plural(2, ...)`` ->
    ``"2 KV blocks"`` (nouns that take a plain ``s``); ``grouped``: thousands separators
    (``plural(1200, "error", grouped=True)`` -> ``"1,200 errors"``)."""
    shown = f"{count:,}" if grouped else str(count)
    return f"{shown} {noun}" if count == 1 else f"{shown} {noun}s"
