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
    # the session layer carries the last breakpoint: the whole prefix up to it is cached
    prefix = _number(r"session\s*[│|]\s+5m\s*[│|]\s+([\d,]+)", out)
    assert 9_000 <= prefix <= 11_000
    uncached = _number(r"question \(uncached\)\s*[│|]\s+([\d,]+)", out) / 1_000
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


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"[│|]", line)[1:-1]]


def _row(out: str, first: str) -> list[str]:
    for line in out.splitlines():
        cells = _cells(line)
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no table row {first!r} in the example's output:\n{out}")


def _count(cell: str) -> int:
    return int(cell.replace(",", ""))


def _usd(cell: str) -> float:
    return float(cell.removeprefix("$").replace(",", ""))


def test_every_number_the_quickstart_prints_follows_from_its_token_counts() -> None:
    """Each layer, breakpoint, segment and cost figure agrees with the token counts the example
    prints and Anthropic's list rates for Claude Sonnet 4.5 ($3 input, $15 output per million
    tokens; 5-minute writes 1.25x, reads 0.1x of input), computed here by hand."""
    run = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=False, timeout=120
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    layers = {name: _count(_row(out, name)[1]) for name in ("tools", "frozen", "session")}
    assert _count(_row(out, "history")[1]) == 0  # no history before the first question
    question = _count(_row(out, "dynamic")[1])
    frozen = layers["tools"] + layers["frozen"]
    assert _number(r"frozen tokens: ([\d,]+)", out) == frozen
    # the two breakpoints: end of the frozen layer, end of the session layer (its 18 tokens)
    assert _row(out, "system[3]")[1:] == ["frozen", "5m", f"{frozen:,}"]
    assert _row(out, "system[4]")[1:] == ["session", "5m", f"{frozen + layers['session']:,}"]
    assert "OpenAI rendering: 3 messages, 2 tools" in out  # frozen, session, question
    segments = [_row(out, str(i))[1] for i in range(8)]
    assert segments == [f"tools[{i}]" for i in range(2)] + [f"system[{i}]" for i in range(5)] + [
        "messages[0]"
    ]
    assert "prefix shared for 7 of 8 segments" in out  # all but the question
    # the breaker appends to the 70-character first system block
    system = "You are a senior engineer reviewing code for the Acme billing service."
    assert f"changed at char {len(system)} of the text" in out
    per_day, later = 1_000, 999
    # Every request carries the same session block (one user), so the breakpoint on it is
    # written by the first request and read by the 999 after it, like the frozen one: only the
    # question after the last breakpoint bills as uncached input.
    cached = frozen + layers["session"]
    uncached = question
    rate_in, rate_out = 3 / 1e6, 15 / 1e6
    assert _row(out, "cached prefix: write")[1:] == [
        f"{cached:,}",
        "",
        _cells_usd(cached * 1.25 * rate_in),
    ]
    assert _row(out, "cached prefix: reads")[1:] == [
        f"{cached * later:,}",
        "",
        _cells_usd(cached * later * 0.1 * rate_in),
    ]
    without_prefix = cached * per_day * rate_in
    assert _row(out, "prefix at input rate")[1:] == [
        f"{cached * per_day:,}",
        _cells_usd(without_prefix),
        "",
    ]
    tail = uncached * per_day * rate_in
    assert _row(out, "question (uncached)")[1:] == [
        f"{uncached * per_day:,}",
        _cells_usd(tail),
        _cells_usd(tail),
    ]
    output = 300 * per_day * rate_out
    assert _row(out, "output")[1:] == ["300,000", _cells_usd(output), _cells_usd(output)]
    with_cache = cached * (1.25 + later * 0.1) * rate_in + tail + output
    without = without_prefix + tail + output
    total = _row(out, "total")
    assert (_usd(total[2]), _usd(total[3])) == (round(without, 2), round(with_cache, 2))
    saving_input = 100 * (1 - (with_cache - output) / (without - output))
    assert f"saving on input: {saving_input:.1f}%" in out
    saving = f"saving in total: {100 * (1 - with_cache / without):.1f}%"
    assert f"{saving} (${without - with_cache:,.2f} per day)" in out


def _cells_usd(value: float) -> str:
    return f"${value:,.2f}"
