"""The runnable reproductions of tests/lint/real_cases/: found on the bad side, silent on the
fixed side (programs/real_cases_driver.py runs them; docs/check.md lists the others and why they
cannot run here).

Two of them are runnable but leave check nothing to prove: their Anthropic requests carry no
``cache_control``, and Anthropic caches nothing unasked, so a clock in the prompt breaks no cache
entry. Check says so in a note instead of a finding.
"""

from __future__ import annotations

import pytest
from check_support import by_function, check_program

from promptcache.check.runner import CheckResult

#: case -> (function of the call site, rule) found on the bad side
FOUND = {
    "nanobot_current_time": ("run_turn", "PC001"),
    "nexent_time_str": ("CoreAgent.run", "PC001"),
    "hindsight_codex_uuid_key": ("CodexLLM.call", "PC013"),
    "nanobot_codex_cache_key": ("CodexProvider.chat", "PC013"),
    "browser_use_cache_every_block": ("ChatAnthropic.invoke", "PC007"),
}
#: runnable, but their requests carry no breakpoint: nothing is cached, nothing to prove
NO_BREAKPOINT = ("clawbolt_datetime_section", "anton_minute_clock")


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> CheckResult:
    """Both sides of every runnable case in one pair of runs (bad first, then fixed)."""
    result, _ = check_program(
        tmp_path_factory.mktemp("real"), "real_cases_driver.py", "both", *FOUND, *NO_BREAKPOINT
    )
    return result


def test_bad_side_found_fixed_side_silent(checked: CheckResult) -> None:
    found = {fn: [f.rule for f in fs] for fn, fs in by_function(checked).items()}
    assert found == {function: [rule] for function, rule in FOUND.values()}
    for finding in checked.findings:
        assert finding.site is not None and "/real_cases/" in finding.site.path
        assert "/bad/" in finding.site.path  # nothing on a fixed side


def test_unmarked_anthropic_requests_get_a_note(checked: CheckResult) -> None:
    # bad: both cases' clocks; fixed: anton keeps a day-precision date in its system prompt (its
    # fix), which the one-day shift changes
    assert checked.notes == [
        "run 1: 3 request pair(s) differ in Anthropic/Bedrock requests that carry no cache "
        "breakpoint (those APIs cache nothing unasked); not reported"
    ]
