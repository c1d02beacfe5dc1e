"""examples/sdk_quickstart.py runs offline and prints the numbers its docstring promises."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sdk_quickstart.py"


def _number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not found in the example's output:\n{text}"
    return float(match.group(1).replace(",", ""))


def test_quickstart_output() -> None:
    # rich draws tables with │ on UTF-8 output and | otherwise; the patterns accept both.
    run = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=False, timeout=120
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "warning:" not in out
    prefix = _number(r"frozen tokens: ([\d,]+)", out)
    assert 9_000 <= prefix <= 11_000
    uncached = _number(r"session \+ question\s*[│|]\s+([\d,]+)", out) / 1_000
    # Expected saving on input from Anthropic's documented multipliers alone (1 write at 1.25x,
    # 999 reads at 0.1x, the uncached tail at 1x), independent of the price table.
    expected = 1 - (1.25 * prefix + 999 * 0.1 * prefix + 1_000 * uncached) / (
        1_000 * (prefix + uncached)
    )
    assert abs(_number(r"saving on input: ([\d.]+)%", out) - 100 * expected) < 0.1
    total_saving = _number(r"saving in total: ([\d.]+)%", out)
    assert 70 < total_saving < 100 * expected
    totals = re.search(r"total\s*[│|]\s+[│|]\s+\$([\d,.]+)\s*[│|]\s+\$([\d,.]+)", out)
    assert totals, out
    without, with_cache = (float(v.replace(",", "")) for v in totals.groups())
    assert abs(_number(r"\(\$([\d,.]+) per day\)", out) - (without - with_cache)) < 0.011
    assert "first change at messages[0].content[0].text" in out
    assert "cache breaker found: system[0].text changed" in out
    assert "prompt_cache_key='acme-billing-team'" in out
