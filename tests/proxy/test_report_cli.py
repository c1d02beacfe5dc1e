"""`promptcache report` as a command: time bounds, errors without tracebacks, output files."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import cli
from promptcache.commands.report import GROUP_BY, TimeBound
from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import GROUP_BY_CHOICES
from promptcache.proxy.store import open_log

NOW = 1_764_500_000.0


def test_group_by_choices_agree_with_the_report() -> None:
    assert GROUP_BY == GROUP_BY_CHOICES


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", NOW - 86400),
        ("90m", NOW - 5400),
        ("7d", NOW - 7 * 86400),
        ("1.5h", NOW - 5400),
        ("1764493200", 1764493200.0),
        ("2025-11-30", 1764460800.0),
        ("2025-11-30T09:00", 1764493200.0),
        ("2025-11-30T10:00+01:00", 1764493200.0),
        ("2025-11-30T09:00:00Z", 1764493200.0),
    ],
)
def test_time_bounds(text: str, expected: float) -> None:
    assert TimeBound(now=NOW).convert(text, None, None) == pytest.approx(expected)


def test_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(cli, ["report", "--db", str(tmp_path / "nope.db")])
    assert missing.exit_code == 2
    assert "error: no proxy log at" in missing.output and "Traceback" not in missing.output
    bad_time = runner.invoke(cli, ["report", "--since", "yesterday-ish"])
    assert bad_time.exit_code == 2 and "is not a time" in bad_time.output
    # a usage error, as docs/report.md shows it: the usage line, then the option it names
    assert bad_time.output.startswith("Usage: ")  # CliRunner names the program "cli"
    assert "Error: Invalid value for '--since': 'yesterday-ish' is not a time" in bad_time.output
    log = tmp_path / "log.db"
    open_log(log).close()
    bad_metrics = runner.invoke(
        cli, ["report", "--db", str(log), "--engine-metrics", str(tmp_path / "none.txt")]
    )
    assert bad_metrics.exit_code == 2 and "--engine-metrics" in bad_metrics.output


def test_output_file_and_empty_log(tmp_path: Path) -> None:
    log = tmp_path / "log.db"
    open_log(log).close()
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        cli, ["report", "--db", str(log), "--format", "json", "--output", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["total"]["requests"] == 0
    assert [r["kind"] for r in data["recommendations"]] == ["no_data"]
    # no input tokens: the hit-rate alarm fires rather than passing silently, and says why
    # (a rate of "n/a" is not "under 50.0%"; the window counts as 0%)
    window = ["--since", "2020-01-01", "--until", "2020-01-02"]
    alarm = CliRunner().invoke(
        cli, ["report", "--db", str(log), *window, "--fail-under-hit-rate", "0.5"]
    )
    assert alarm.exit_code == 1
    assert alarm.stderr.splitlines()[-1] == (
        "alert: no input tokens in the window, counted as hit rate 0.0%, under 50.0%"
    )
    # a threshold of 0 is never crossed, with input or without
    zero = CliRunner().invoke(cli, ["report", "--db", str(log), *window,
                                    "--fail-under-hit-rate", "0"])  # fmt: skip
    assert zero.exit_code == 0 and "alert" not in zero.stderr


def test_an_empty_window_gives_its_money_as_decimal_strings_too(tmp_path: Path) -> None:
    """docs/report.md: every money field of the JSON is a decimal string. With no request in
    the window the sums were SQL's integer 0 and came out as the number 0 beside "0" elsewhere,
    so a consumer reading the strings as documented broke on the one window with no traffic."""
    log = tmp_path / "log.db"
    open_log(log).close()
    result = CliRunner().invoke(cli, ["report", "--db", str(log), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    found: list[tuple[str, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key.endswith("_usd") or key.startswith("usd_"):
                    found.append((key, value))
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)
    assert {key for key, _ in found} >= {"cost_usd", "cost_without_cache_usd", "net_savings_usd"}
    assert all(value == "0" for _, value in found), found


def test_the_hit_rate_alert_names_a_measured_rate(tmp_path: Path) -> None:
    """The look-alike of the empty window: with input tokens the alert gives the rate."""
    log = tmp_path / "log.db"
    row = dict.fromkeys(COLUMN_NAMES)
    row.update(
        id="r0", started_at=1_764_493_200.0, stream=0, status=200, vendor="anthropic",
        api="anthropic", model="claude-haiku-4-5", uncached_input_tokens=75,
        cache_read_tokens=25, cache_write_5m_tokens=0, cache_write_1h_tokens=0,
        cache_write_unknown_tokens=0, output_tokens=1, reasoning_tokens=0,
        total_input_tokens=100,
    )  # fmt: skip
    db = open_log(log)
    with db.conn:
        db.table("requests").insert_all([row])
    db.close()
    window = ["--since", "2025-11-30", "--until", "2025-12-01"]
    alarm = CliRunner().invoke(
        cli, ["report", "--db", str(log), *window, "--fail-under-hit-rate", "0.5"]
    )
    assert alarm.exit_code == 1
    assert alarm.stderr.splitlines()[-1] == "alert: hit rate 25.0% is under 50.0%"


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400", "99999999d", "1e300"])
def test_time_bounds_outside_the_calendar_are_usage_errors(tmp_path: Path, text: str) -> None:
    log = tmp_path / "log.db"
    open_log(log).close()
    result = CliRunner().invoke(cli, ["report", "--db", str(log), "--since", text])
    assert result.exit_code == 2, result.output
    assert "--since" in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_output_into_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    log = tmp_path / "log.db"
    open_log(log).close()
    target = tmp_path / "no" / "such" / "r.html"
    result = CliRunner().invoke(
        cli, ["report", "--db", str(log), "--format", "html", "--output", str(target)]
    )
    assert result.exit_code == 2, result.output
    assert "--output" in result.output and str(target) in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    # the folder is named, not the OS's "No such file or directory" / "Not a directory"
    # the words of lint, check, proxy --db and log copy
    assert f"cannot write {target}: folder {target.parent} does not exist" in result.output
    (tmp_path / "a-file").write_text("x")
    for target in (tmp_path / "a-file" / "r.html", tmp_path / "a-file" / "sub" / "r.html"):
        result = CliRunner().invoke(cli, ["report", "--db", str(log), "--output", str(target)])
        assert result.exit_code == 2, result.output
        assert f"cannot write {target}: {tmp_path / 'a-file'} is not a folder" in result.output


@pytest.mark.parametrize("target", ["log.db", "log.db-wal", "./sub/../log.db", "link.db"])
def test_output_onto_the_log_is_refused_and_the_log_kept(tmp_path: Path, target: str) -> None:
    # `report -o log.db` wrote the text report over the proxy's log: every row was gone
    log = tmp_path / "log.db"
    open_log(log).close()
    with closing(sqlite3.connect(log)) as conn, conn:
        conn.execute("INSERT INTO requests (id, started_at, stream) VALUES ('r1', 1.0, 0)")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.db").symlink_to(log)
    before = log.read_bytes()
    result = CliRunner().invoke(
        cli, ["report", "--db", str(log), "--since", "0", "--output", str(tmp_path / target)]
    )
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert (
        f"Invalid value for --output: {tmp_path / target} is the proxy log given with --db "
        f"{log} (or a file of it): writing the report there would destroy the log; give "
        "another file" in message
    ), message
    assert log.read_bytes() == before
    with closing(sqlite3.connect(log)) as conn:
        assert conn.execute("SELECT id FROM requests").fetchall() == [("r1",)]
    # another file beside it is written as before
    elsewhere = tmp_path / "report.txt"
    done = CliRunner().invoke(cli, ["report", "--db", str(log), "--output", str(elsewhere)])
    assert done.exit_code == 0 and elsewhere.read_text(encoding="utf-8").startswith(
        "promptcache report"
    )


@pytest.mark.parametrize(
    ("window", "seconds"), [(["--since", "1h"], 3600), (["--since", "3h", "--until", "1h"], 7200)]
)
def test_durations_count_back_from_one_now(tmp_path: Path, window: list[str], seconds: int) -> None:
    # each bound read the clock when it was parsed and the default --until once more later, so
    # --since 1h gave a window of an hour and the time the command took to start
    log = tmp_path / "log.db"
    open_log(log).close()
    result = CliRunner().invoke(cli, ["report", "--db", str(log), *window, "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["until"] - data["since"] == seconds
    if "--until" not in window:
        assert data["until"] == data["generated_at"]


def test_a_log_from_a_newer_promptcache_is_refused(tmp_path: Path) -> None:
    from promptcache.proxy.store import SCHEMA_VERSION

    log = tmp_path / "log.db"
    db = open_log(log)
    db.execute("INSERT INTO schema_version VALUES (?, 0)", [SCHEMA_VERSION + 1])
    db.conn.commit()
    db.close()
    result = CliRunner().invoke(cli, ["report", "--db", str(log)])
    assert result.exit_code == 2, result.output
    assert "newer than this promptcache" in result.output


def test_a_locked_log_is_called_locked_not_a_file_that_is_not_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a copy of a log in rollback-journal mode, held by a `sqlite3` shell in BEGIN EXCLUSIVE
    # (the proxy's own WAL log never locks its readers out)
    monkeypatch.setattr("promptcache.proxy.report.LOCK_WAIT_S", 0.2, raising=False)
    log = tmp_path / "log.db"
    open_log(log).close()
    with closing(sqlite3.connect(log, isolation_level=None)) as holder:
        assert holder.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
        holder.execute("BEGIN EXCLUSIVE")
        result = CliRunner().invoke(cli, ["report", "--db", str(log)])
        holder.execute("ROLLBACK")
    assert result.exit_code == 2, result.output
    assert "is locked by another connection" in result.output, result.output
    assert "not a SQLite database" not in result.output and "Traceback" not in result.output
    assert CliRunner().invoke(cli, ["report", "--db", str(log)]).exit_code == 0  # released


def test_a_folder_given_as_the_log_is_called_a_folder(tmp_path: Path) -> None:
    # not "no proxy log at X: start `promptcache proxy --db X` first", which the proxy refuses
    result = CliRunner().invoke(cli, ["report", "--db", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"error: {tmp_path} is a folder, not a proxy log" in result.output
    assert "start `promptcache proxy" not in result.output


def test_a_log_one_step_behind_is_migrated_before_reading(tmp_path: Path) -> None:
    from promptcache.proxy.store import SCHEMA_VERSION

    log = tmp_path / "log.db"
    db = open_log(log)
    db.execute("DELETE FROM schema_version WHERE version = ?", [SCHEMA_VERSION])
    db.conn.commit()
    db.close()
    result = CliRunner().invoke(cli, ["report", "--db", str(log), "--format", "json"])
    assert result.exit_code == 0, result.output
    with closing(sqlite3.connect(log)) as conn:  # not open_log: that would migrate it too
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_version")]
    assert max(versions) == SCHEMA_VERSION and versions.count(SCHEMA_VERSION) == 1


@contextmanager
def _tmpfs(folder: Path) -> Iterator[Path]:
    """A small tmpfs mounted on ``folder`` (skips where mounting is not allowed)."""
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a read-only file system")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace')}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_log_on_a_read_only_mount_is_read_and_an_old_one_says_what_to_do(
    tmp_path: Path,
) -> None:
    # A WAL-mode log where SQLite cannot create its -shm file: an analyst reading a service's
    # log from a read-only mount or someone else's folder.
    from promptcache.proxy.store import SCHEMA_VERSION

    current, old = tmp_path / "log.db", tmp_path / "old.db"
    open_log(current).close()
    db = open_log(old)
    db.execute("DELETE FROM schema_version WHERE version = ?", [SCHEMA_VERSION])
    db.conn.commit()
    db.close()
    with _tmpfs(tmp_path / "ro") as folder:
        shutil.copy(current, folder / "log.db")
        shutil.copy(old, folder / "old.db")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        runner = CliRunner()
        result = runner.invoke(cli, ["report", "--db", str(folder / "log.db"), "--format", "json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["total"]["requests"] == 0
        stale = runner.invoke(cli, ["report", "--db", str(folder / "old.db")])
    assert stale.exit_code == 2
    assert "copy it somewhere writable" in stale.output and "Traceback" not in stale.output


@pytest.mark.parametrize("since", ["0m", "2999-01-01"])
def test_an_empty_window_to_now_names_since_alone(tmp_path: Path, since: str) -> None:
    # with no --until the window ends now: the error was "--until must be later than --since"
    log = tmp_path / "log.db"
    open_log(log).close()
    result = CliRunner().invoke(cli, ["report", "--db", str(log), "--since", since])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--since': the window from --since to now is empty" in result.output
    assert "--until" not in result.output and "Traceback" not in result.output
    given = CliRunner().invoke(cli, ["report", "--db", str(log), "--since", "1h", "--until", "2h"])
    assert given.exit_code != 0 and "--until must be later than --since" in given.output
