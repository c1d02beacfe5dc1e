"""``promptcache log copy SRC DST``: a SQLite log into Postgres (and back), once.

Real logs on both sides: SQLite files and databases on the session's Postgres server
(pg_server.py). The copied log must report exactly what its source does.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from test_postgres_report import T0, all_rows, assert_same, sqlite_log

from promptcache.errors import ConfigError
from promptcache.proxy.log_copy import COPY_MARKER, copy_log, log_identity
from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import build_report
from promptcache.proxy.store import open_log
from promptcache.proxy.store_postgres import PgConnection

WINDOW = {"since": T0 - 7200, "until": T0 + 7 * 3600, "now": T0 + 3600}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "promptcache"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


def count(location: str | Path) -> int:
    db = open_log(location)
    try:
        return int(db.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
    finally:
        db.close()


def test_sqlite_into_postgres_once_then_back(tmp_path: Path, pg_url: str) -> None:
    rows = all_rows()
    src = sqlite_log(tmp_path / "proxy.db", rows)
    done = cli("log", "copy", str(src), pg_url)
    assert done.returncode == 0, done.stderr
    shown = pg_url.replace("postgres@", "***@")  # the user is masked like a password
    assert f"copied {len(rows):,} requests from {src} to {shown}" in done.stdout
    assert "now uses the source's key salt" in done.stdout
    assert count(pg_url) == len(rows)
    a = build_report(src, group_by="model", **WINDOW)
    b = build_report(pg_url, group_by="model", **WINDOW)
    assert_same(dataclasses.asdict(dataclasses.replace(b, db=a.db)), dataclasses.asdict(a))

    again = cli("log", "copy", str(src), pg_url)
    assert again.returncode == 2
    assert again.stderr.startswith("error: ") and "already holds a copy" in again.stderr
    assert f"{len(rows)} rows copied at" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    assert count(pg_url) == len(rows)

    back = tmp_path / "back.db"
    result = copy_log(pg_url, back)
    assert result.rows == len(rows)
    c = build_report(back, group_by="model", **WINDOW)
    assert_same(dataclasses.asdict(dataclasses.replace(c, db=a.db)), dataclasses.asdict(a))


def test_the_marker_names_the_source_and_the_salt_follows(tmp_path: Path, pg_url: str) -> None:
    src = sqlite_log(tmp_path / "proxy.db", all_rows()[:50])
    lite = open_log(src)
    identity = log_identity(lite)
    lite.close()
    copy_log(src, pg_url)
    with PgConnection(pg_url) as conn:
        keys = [r[0] for r in conn.execute("SELECT key FROM proxy_settings ORDER BY key")]
        assert keys == [COPY_MARKER + identity, "key_salt"]
        assert log_identity(conn) == identity


def test_a_failed_copy_leaves_the_destination_unchanged(tmp_path: Path, pg_url: str) -> None:
    rows = all_rows()
    src = sqlite_log(tmp_path / "proxy.db", rows)
    other = sqlite_log(tmp_path / "other.db", rows[-1:])  # the same id as SRC's last row
    copy_log(other, pg_url)
    with pytest.raises(ConfigError, match=f"already holds request {rows[-1]['id']} of "):
        copy_log(src, pg_url)
    assert count(pg_url) == 1
    with PgConnection(pg_url) as conn:
        markers = conn.execute("SELECT COUNT(*) FROM proxy_settings WHERE key LIKE 'copied%'")
        assert markers.fetchone()[0] == 1


def test_refusals(tmp_path: Path) -> None:
    src = sqlite_log(tmp_path / "proxy.db", all_rows()[:5])
    with pytest.raises(ConfigError, match="name one database"):
        copy_log(src, src)
    twin = tmp_path / "twin.db"  # the file copied as it is: the same log under another name
    twin.write_bytes(src.read_bytes())
    with pytest.raises(ConfigError, match="are the same log"):
        copy_log(twin, src)
    with pytest.raises(ConfigError, match="no log at"):
        copy_log(tmp_path / "missing.db", tmp_path / "dst.db")
    junk = tmp_path / "junk.db"
    sqlite3.connect(junk).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ConfigError, match="not a promptcache log"):
        copy_log(junk, tmp_path / "dst.db")
    # a log another connection holds locked is locked, not "not a promptcache log"
    with closing(sqlite3.connect(twin, isolation_level=None)) as holder:
        assert holder.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(ConfigError, match="is locked by another connection"):
            copy_log(twin, tmp_path / "dst.db")
        holder.execute("ROLLBACK")
    assert not (tmp_path / "dst.db").exists()


def test_a_destination_sqlite_cannot_create_says_what_to_change(tmp_path: Path) -> None:
    # SQLite's own "unable to open database file" names neither cause
    src = sqlite_log(tmp_path / "proxy.db", all_rows()[:2])
    missing = tmp_path / "no-such-folder" / "dst.db"
    done = cli("log", "copy", str(src), str(missing))
    assert done.returncode == 2
    assert done.stderr == (
        f"error: cannot open the request log {missing}: folder {missing.parent} does not "
        "exist; give another path\n"
    )
    folder = tmp_path / "logs"
    folder.mkdir()
    done = cli("log", "copy", str(src), str(folder))
    assert done.returncode == 2
    assert done.stderr == (
        f"error: cannot open the request log {folder}: {folder} is a folder; give the name of "
        "a log file\n"
    )
    assert list(folder.iterdir()) == [] and not missing.parent.exists()
    # the words of lint, report, check and proxy --db; a file further up is named too
    for under_a_file in (src / "dst.db", src / "sub" / "dst.db"):
        done = cli("log", "copy", str(src), str(under_a_file))
        assert done.returncode == 2
        assert done.stderr == (
            f"error: cannot open the request log {under_a_file}: {src} is not a folder; give "
            "another path\n"
        )


def test_a_source_on_a_read_only_mount_is_copied_and_an_old_one_says_what_to_do(
    tmp_path: Path,
) -> None:
    # A WAL-mode log where SQLite cannot create its -shm file (a read-only mount): a current
    # log is copied; a log of an older schema, which log copy would upgrade in place first,
    # is refused in one line that says so, not called "not a promptcache log".
    from test_report_cli import _tmpfs

    from promptcache.proxy.store import SCHEMA_VERSION

    current = sqlite_log(tmp_path / "log.db", all_rows()[:5])
    old = sqlite_log(tmp_path / "old.db", all_rows()[:5])
    with sqlite3.connect(old) as conn:
        conn.execute("DELETE FROM schema_version WHERE version = ?", [SCHEMA_VERSION])
    conn.close()
    with _tmpfs(tmp_path / "ro") as folder:
        shutil.copy(current, folder / "log.db")
        shutil.copy(old, folder / "old.db")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        done = cli("log", "copy", str(folder / "log.db"), str(tmp_path / "dst.db"))
        stale = cli("log", "copy", str(folder / "old.db"), str(tmp_path / "dst2.db"))
    assert done.returncode == 0, done.stderr
    assert count(str(tmp_path / "dst.db")) == 5
    assert stale.returncode == 2
    assert stale.stderr == (
        f"error: {folder / 'old.db'} is a log of an older promptcache (schema "
        f"{SCHEMA_VERSION - 1}); log copy upgrades SRC in place first, which needs write access "
        "to it and its folder: copy the file somewhere writable and pass that copy as SRC\n"
    )
    assert not (tmp_path / "dst2.db").exists()


def test_logs_sharing_a_request_are_refused_in_one_line(tmp_path: Path, pg_url: str) -> None:
    # Postgres reports a duplicate key on three lines (message, DETAIL, CONTEXT): the CLI
    # prints one, naming the request, on either backend, and DST keeps what it held.
    rows = all_rows()
    src = sqlite_log(tmp_path / "proxy.db", rows)
    shared = rows[len(rows) // 2]["id"]
    other = sqlite_log(tmp_path / "other.db", [rows[len(rows) // 2]])
    assert cli("log", "copy", str(other), pg_url).returncode == 0
    shown = pg_url.replace("postgres@", "***@")
    for dst, name in ((pg_url, shown), (str(other), str(other))):
        done = cli("log", "copy", str(src), dst)
        assert done.returncode == 2, done.stdout
        assert done.stderr == (
            f"error: {name} already holds request {shared} of {src}: the two logs share "
            "requests, and a request is copied once; nothing was copied\n"
        )
        assert count(dst) == 1


def test_another_programs_sqlite_database_is_left_as_it_was(tmp_path: Path) -> None:
    src = sqlite_log(tmp_path / "proxy.db", all_rows()[:5])
    app = tmp_path / "app.db"
    with sqlite3.connect(app) as conn:
        conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        conn.execute("INSERT INTO users VALUES (1, 'ada')")
    conn.close()
    other = tmp_path / "other.db"  # a table named requests, but not ours
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE requests (id INTEGER, url TEXT)")
    conn.close()
    before = {path: path.read_bytes() for path in (app, other)}
    into = cli("log", "copy", str(src), str(app))
    assert into.returncode == 2
    assert into.stderr == (
        f"error: {app} is a SQLite database but not a promptcache request log (its tables: "
        "users); it was left as it was: give a new file or a log promptcache wrote\n"
    )
    out_of = cli("log", "copy", str(other), str(tmp_path / "dst.db"))
    assert out_of.returncode == 2
    assert out_of.stderr.startswith(f"error: {other} is a SQLite database but not a promptcache")
    assert len(out_of.stderr.splitlines()) == 1
    assert not (tmp_path / "dst.db").exists()
    for path, data in before.items():
        assert path.read_bytes() == data
        assert not Path(f"{path}-wal").exists()


def test_src_and_dst_naming_one_file_or_database(tmp_path: Path, pg_url: str) -> None:
    src = sqlite_log(tmp_path / "proxy.db", all_rows()[:5])
    link = tmp_path / "link.db"
    link.symlink_to(src)
    (tmp_path / "sub").mkdir()
    for dst in (str(link), f"{tmp_path}/sub/../proxy.db"):
        done = cli("log", "copy", str(src), dst)
        assert done.returncode == 2
        assert done.stderr == (
            f"error: SRC {src} and DST {dst} name one database; give two different logs\n"
        )
    assert count(src) == 5
    copy_log(src, pg_url)
    again = cli("log", "copy", pg_url, pg_url)
    assert again.returncode == 2
    assert "name one database; give two different logs" in again.stderr
    assert count(pg_url) == 5


def test_a_postgres_database_without_a_log_is_not_a_source(tmp_path: Path, pg_url: str) -> None:
    done = cli("log", "copy", pg_url, str(tmp_path / "dst.db"))
    assert done.returncode == 2
    shown = pg_url.replace("postgres@", "***@")
    assert done.stderr == (
        f"error: {shown} holds no promptcache log: give as SRC a database a proxy writes to "
        "(promptcache proxy --db URL)\n"
    )
    assert not (tmp_path / "dst.db").exists()
    with PgConnection(pg_url) as conn:  # no table of ours was created in it
        tables = conn.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        )
        assert tables.fetchone()[0] == 0


def test_one_request_is_counted_in_the_singular(tmp_path: Path) -> None:
    src = sqlite_log(tmp_path / "proxy.db", all_rows()[:1])
    dst = tmp_path / "dst.db"
    done = cli("log", "copy", str(src), str(dst))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"copied 1 request from {src} to {dst} ("), done.stdout
    assert count(dst) == 1
    again = cli("log", "copy", str(src), str(dst))
    assert again.returncode == 2
    with closing(open_log(src)) as db:
        identity = log_identity(db)
    assert f"(log {identity[:8]}): 1 row copied at " in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    assert count(dst) == 1


def test_a_copy_of_a_copy_refused_names_the_copy_the_destination_holds(tmp_path: Path) -> None:
    # a.db -> b.db -> c.db, then c.db back into b.db: b.db holds a.db's copy (5 rows), which
    # c.db shares the key salt of; the refusal said 'b.db already holds a copy of c.db: 5 rows'
    a = sqlite_log(tmp_path / "a.db", all_rows()[:5])
    b, c = tmp_path / "b.db", tmp_path / "c.db"
    copy_log(a, b)
    copy_log(b, c)
    with closing(open_log(a)) as db:
        identity = log_identity(db)
    refused = cli("log", "copy", str(c), str(b))
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(
        f"error: {b} already holds a copy of log {identity[:8]}: 5 rows copied from {a} at "
    ), refused.stderr
    assert f"; {c} is that log or a copy of it (the same key salt), and a log is copied once" in (
        refused.stderr
    )
    assert f"a copy of {c}" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert count(b) == 5


def bodies(location: str | Path) -> list[tuple[object, ...]]:
    db = open_log(location)
    try:
        return [tuple(r) for r in db.execute("SELECT * FROM prefix_bodies ORDER BY 1, 2, 3")]
    finally:
        db.close()


def test_stored_prefix_bodies_follow_the_requests(tmp_path: Path, pg_url: str) -> None:
    src = sqlite_log(tmp_path / "proxy.db", all_rows()[:20])
    stored = [
        (f"key{i}", "tiny", f"family{i}", "openai_chat", f"req{i}", T0 + i, f'{{"n": {i}}}')
        for i in range(3)
    ]
    with sqlite3.connect(src) as conn:
        conn.executemany("INSERT INTO prefix_bodies VALUES (?, ?, ?, ?, ?, ?, ?)", stored)
    # the destination already holds a more recent body of family1: it keeps it
    newer = ("key1", "tiny", "family1", "openai_chat", "later", T0 + 100, '{"n": "later"}')
    db = open_log(pg_url)
    db.execute("INSERT INTO prefix_bodies VALUES (?, ?, ?, ?, ?, ?, ?)", newer)
    db.conn.commit()
    db.close()

    done = cli("log", "copy", str(src), pg_url)
    assert done.returncode == 0, done.stderr
    assert "\nand 2 stored prefix bodies (--store-prefixes)" in done.stdout, done.stdout
    assert bodies(pg_url) == [stored[0], newer, stored[2]]

    back = tmp_path / "back.db"
    one = cli("log", "copy", pg_url, str(back))
    assert one.returncode == 0, one.stderr
    assert "\nand 3 stored prefix bodies (--store-prefixes)" in one.stdout, one.stdout
    assert bodies(back) == [stored[0], newer, stored[2]]


def _turns(arrivals: list[float]) -> list[dict[str, Any]]:
    """One conversation's requests in the order a proxy logs them, each naming the one before
    as its predecessor and breaking the cache; ``arrivals`` are their ``started_at`` offsets.
    Under concurrency a predecessor may have *arrived* later than its successor (it answered
    sooner), so ``started_at`` need not grow along the chain."""
    rows = []
    for i, offset in enumerate(arrivals):
        values = dict.fromkeys(COLUMN_NAMES)
        values.update(
            id=f"turn-{i}",
            started_at=T0 + offset,
            ended_at=T0 + 100,
            vendor="openai",
            api="openai_chat",
            route="/v1/chat/completions",
            model="gpt-4o",
            status=200,
            stream=0,
            key_fingerprint="k1",
            uncached_input_tokens=40,
            cache_read_tokens=60,
            total_input_tokens=100,
            output_tokens=5,
            previous_request_id=f"turn-{i - 1}" if i else None,
            break_reason="system_changed" if i else None,
            break_segment="messages[0].content" if i else None,
        )
        rows.append(values)
    return rows


def _breaks(location: str | Path) -> list[tuple[Any, ...]]:
    db = open_log(location)
    try:
        return [tuple(r) for r in db.execute("SELECT * FROM report_breaks_hourly").fetchall()]
    finally:
        db.close()


@pytest.mark.parametrize(
    "arrivals",
    [[0.0, 10.0, 20.0], [20.0, 10.0, 30.0], [20.0, 0.0, 10.0]],
    ids=["in-order", "predecessor-arrived-later", "predecessor-held-for-its-own"],
)
def test_a_predecessor_that_arrived_later_is_copied_before_its_successor(
    tmp_path: Path, pg_url: str, arrivals: list[float]
) -> None:
    src = sqlite_log(tmp_path / "proxy.db", _turns(arrivals))
    lost = _breaks(src)
    assert [row[4:6] for row in lost] == [(2, 80)]  # each break lost its 40 uncached tokens
    copy_log(src, tmp_path / "copy.db")
    assert _breaks(tmp_path / "copy.db") == lost
    copy_log(src, pg_url)
    assert _breaks(pg_url) == lost
