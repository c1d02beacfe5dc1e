"""Several proxy logs reported as one: ``promptcache report --db a.db --db b.db``.

Proxies behind a load balancer each keep their own SQLite log. :func:`merged_log` copies the
rows of every given log into one temporary log (created with the current schema, so the rollup
triggers of :mod:`.rollup` and :mod:`.report.replicas` fill its rollups as the rows go in) and
yields its path; the report then reads it like any log. Each source is first opened as the
report opens a log (:func:`.report.connect_log`: checked, and migrated if older), then
attached read-only and copied in one ``INSERT ... SELECT`` in its own row order, so a row's
predecessor (``previous_request_id``, always in the same log) is copied before it.

Request ids are UUIDv7s, unique across proxies; a row whose id is already in the merged log
(the same log given twice under two names, or a copy of it) is counted once. Key fingerprints
are salted per log (``proxy_settings.key_salt``), so ``--group-by key`` shows one API key
once per proxy.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from promptcache.errors import ConfigError, StoreError

from ..record import COLUMN_NAMES
from ..store import open_log

__all__ = ["merged_log"]


@contextmanager
def merged_log(paths: Sequence[str | Path]) -> Iterator[Path]:
    """A temporary log holding every row of ``paths``; deleted when the block ends.

    Raises:
        ConfigError: a path is given twice, two paths name the same file (a symlink or a hard
            link to it), or a path is not a proxy log.
        StoreError: a log could not be read or migrated, or the temporary log written.
    """
    from . import connect_log  # report imports this module

    resolved = [Path(p).resolve() for p in paths]
    files = [_file_identity(path) for path in resolved]
    for i, file in enumerate(files):
        if file not in files[:i]:
            continue
        first = files.index(file)
        if Path(paths[first]) == Path(paths[i]):
            raise ConfigError(f"--db {paths[i]} is given twice; give each log once")
        raise ConfigError(
            f"--db {paths[first]} and --db {paths[i]} name the same file ({resolved[first]}); "
            "give each log once"
        )
    for given in paths:
        connect_log(given).close()  # checks it, and migrates an older log in place
    with tempfile.TemporaryDirectory(prefix="promptcache-report-") as folder:
        merged = Path(folder) / "merged.db"
        open_log(merged).close()
        columns = ", ".join(COLUMN_NAMES)
        conn = sqlite3.connect(f"{merged.as_uri()}", uri=True)
        try:
            for path in resolved:
                _attach(conn, path)
                try:
                    with conn:
                        conn.execute(
                            f"INSERT OR IGNORE INTO main.requests ({columns}) "
                            f"SELECT {columns} FROM src.requests ORDER BY rowid"
                        )
                finally:
                    conn.execute("DETACH DATABASE src")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot merge the request logs: {exc}") from exc
        finally:
            conn.close()
        yield merged


def _file_identity(path: Path) -> tuple[int, int] | Path:
    """What names one file however it is reached: its device and inode numbers (a symlink and a
    hard link land on their target's), or the resolved ``path`` itself when it cannot be read."""
    try:
        info = path.stat()
    except OSError:
        return path
    return (info.st_dev, info.st_ino)


def _attach(conn: sqlite3.Connection, path: Path) -> None:
    """Attach ``path`` read-only as ``src`` (as it is on disk when its folder is read-only,
    like :func:`.report.connect_log`)."""
    uri = f"{path.as_uri()}?mode=ro"
    try:
        conn.execute("ATTACH DATABASE ? AS src", (uri,))
        conn.execute("SELECT COUNT(*) FROM src.sqlite_master").fetchone()
    except sqlite3.OperationalError:
        if os.access(path.parent, os.W_OK):
            raise
        conn.execute("DETACH DATABASE src")
        conn.execute("ATTACH DATABASE ? AS src", (uri + "&immutable=1",))
