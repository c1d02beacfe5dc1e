"""`promptcache report`: alert thresholds that could never (or always) fire are usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import cli


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--fail-under-hit-rate", "nan", "'nan' is not a finite number; give a number from 0 to 1"),
        ("--fail-under-hit-rate", "inf", "not in the range"),
        ("--fail-under-hit-rate", "1.5", "not in the range"),
        ("--fail-under-hit-rate", "-0.1", "not in the range"),
        # a percentage: the fraction to pass instead
        (
            "--fail-under-hit-rate",
            "90",
            "'90' is above 1: a hit rate is a fraction from 0 to 1, so for 90% pass 0.9",
        ),
        ("--fail-under-hit-rate", "100", "so for 100% pass 1"),
        ("--fail-under-hit-rate", "100.5", "not in the range"),
        ("--fail-over-cost", "nan", "'nan' is not a finite number; give a number >= 0"),
        ("--fail-over-cost", "inf", "'inf' is not a finite number; give a number >= 0"),
        ("--fail-over-cost", "-1", "not in the range"),
    ],
)
def test_thresholds_must_be_finite_and_in_range(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    db = tmp_path / "log.db"
    result = CliRunner().invoke(cli, ["report", "--db", str(db), option, value])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not db.exists()  # refused before the log was read


METRICS = """\
# TYPE promptcache_engine_kv_cache_usage_ratio gauge
promptcache_engine_kv_cache_usage_ratio 0.42
# TYPE promptcache_engine_preemptions_total counter
promptcache_engine_preemptions_total 3
# TYPE promptcache_engine_swapped_sequences gauge
promptcache_engine_swapped_sequences 1
# TYPE promptcache_engine_prefix_cache_queries_tokens_total counter
promptcache_engine_prefix_cache_queries_tokens_total 1000
# TYPE promptcache_engine_prefix_cache_hits_tokens_total counter
promptcache_engine_prefix_cache_hits_tokens_total 250
"""


def test_engine_metrics_are_shown_in_the_table_report(tmp_path: Path) -> None:
    from promptcache.proxy.store import open_log

    db, metrics = tmp_path / "log.db", tmp_path / "metrics.txt"
    open_log(db).close()
    metrics.write_text(METRICS, encoding="utf-8")
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "--engine-metrics", str(metrics)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Engine KV pool (--engine-metrics)" in out
    for name, value in [
        ("KV blocks in use", "42.0%"),
        ("preemptions since start", "3"),
        ("sequences swapped out now", "1"),
        ("prefix-cache hit rate since start", "25.0%"),
    ]:
        (line,) = [ln for ln in out.splitlines() if name in ln]
        assert line.rstrip(" │|").endswith(value), line
    plain = CliRunner().invoke(cli, ["report", "--db", str(db)])
    assert plain.exit_code == 0 and "Engine KV pool" not in plain.stdout


@pytest.mark.parametrize(
    ("source", "message"),
    [
        # the proxy's own log given by mistake: binary, not UTF-8 (a UnicodeDecodeError escaped)
        ("log.db", "cannot read {tmp}/log.db: not UTF-8 text (byte "),
        # a bracketed IPv6 host left open (httpx.InvalidURL is no HTTPError and escaped)
        ("http://[::1", "cannot read http://[::1: Invalid port: ':1'"),
    ],
)
def test_engine_metrics_that_cannot_be_read_are_usage_errors(
    tmp_path: Path, source: str, message: str
) -> None:
    from promptcache.proxy.store import open_log

    db = tmp_path / "log.db"
    open_log(db).close()
    given = str(tmp_path / source) if source == "log.db" else source
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "--engine-metrics", given])
    assert result.exit_code == 2, result.output  # an escaped exception exits 1
    assert "Invalid value for --engine-metrics: " + message.format(tmp=tmp_path) in result.output


def test_engine_metrics_in_utf8_with_non_ascii_help_text_are_read(tmp_path: Path) -> None:
    from promptcache.proxy.store import open_log

    db, metrics = tmp_path / "log.db", tmp_path / "metrics.txt"
    open_log(db).close()
    help_text = "# HELP x_total caf\u00e9 \u2713\n# TYPE x_total counter\nx_total 1\n"
    metrics.write_text(help_text + METRICS, "utf-8")
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "--engine-metrics", str(metrics)])
    assert result.exit_code == 0, result.output
    assert "Engine KV pool (--engine-metrics)" in result.stdout
