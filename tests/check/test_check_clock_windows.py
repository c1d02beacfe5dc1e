"""An hour with am or pm is the clock's only where both runs' clocks showed it while they ran:
each run's window is its start to its end, not a fixed half hour after its start, so a random
draw that happens to be run 0's hour is not the clock unless the other run's draw is an hour the
other run's clock showed too. Fixed clocks, so the answer does not depend on the time of day."""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterator

import pytest

from promptcache.check.causes import _moved_as_the_clocks
from promptcache.check.perturbation import CLOCK_SHIFT


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _hour(moment: time.struct_time) -> int:
    return moment.tm_hour % 12 or 12


START = float(calendar.timegm((2026, 12, 7, 18, 30, 44)))  # 6:30 PM UTC
SHIFT = CLOCK_SHIFT.total_seconds()  # run 1's clock: 9:48 PM on the day after next
RUNS = [START, START + 2.5, START + SHIFT, START + SHIFT + 2.4]


def test_a_clock_read_in_both_runs_moves_as_the_clocks() -> None:
    assert _moved_as_the_clocks({6}, {9}, RUNS, _hour, 12, derived=False)


def test_a_draw_that_is_run_0s_hour_is_not_the_clock_where_run_1s_draw_is_not_its_hour() -> None:
    # random.randint(1, 12) gives 6 in run 0 (its clock's hour) and 10 in run 1 (its clock
    # shows 9 PM from start to end)
    assert not _moved_as_the_clocks({6}, {10}, RUNS, _hour, 12, derived=False)


def test_a_run_that_crosses_the_hour_shows_both_hours() -> None:
    late = START + 29 * 60 + 10  # 6:59:54 PM, the run ends after 7 PM
    runs = [late, late + 10.0, late + SHIFT, late + SHIFT + 10.0]
    assert _moved_as_the_clocks({7}, {10}, runs, _hour, 12, derived=False)
    assert _moved_as_the_clocks({6}, {10}, runs, _hour, 12, derived=False)


def test_two_readings_keep_the_half_hour_window() -> None:
    # callers that give only the starts: each run may have read its clock up to 30 min later
    assert _moved_as_the_clocks({6}, {10}, [START, START + SHIFT], _hour, 12, derived=False)
