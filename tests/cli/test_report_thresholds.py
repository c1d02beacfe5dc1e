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
