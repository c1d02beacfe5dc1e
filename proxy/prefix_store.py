"""One representative request body per prefix family (``promptcache proxy --store-prefixes``).

Off by default, because it stores prompt text. With it on, the proxy keeps, in the log's
``prefix_bodies`` table, the body of the **latest** successful request (2xx status, no error)
of each prefix family: the family is the report's (key fingerprint, model, ``prefix_family``,
see :data:`.rollup.FAMILY_KEY`), so a family's stored body follows its newest form (a system
prompt edited in place, a tool added) and the table holds one row per family however long the
proxy runs. The body is the request as the client sent it, decoded as UTF-8 and then redacted
exactly as ``--store-bodies`` redacts (:func:`.redact.redact_text` with the request's own
credentials and the proxy's auth token), so a stored body never holds a credential the
proxy's redaction recognises. ``engine serve --warmup-from-log`` reads these bodies back and
prefills the costliest families (:func:`costliest_prefixes`).

Writing stays off the request path: :meth:`PrefixStore.offer` only puts the request in a dict
keyed by family (a later request of the family replaces an earlier one); a writer thread
redacts the waiting bodies and upserts them at least every ``flush_interval_s`` (one
transaction per round), and ``close()`` writes what is left. So a ``kill -9`` loses at most the
bodies of the last interval, as for the request rows (:mod:`.store`). The upsert keeps the row
with the later ``started_at``, so several proxies writing one log keep the latest too.

The table is schema step 11 (:func:`add_prefix_bodies`); its DDL and statements are standard
SQL that SQLite (3.24 and later: ``ON CONFLICT ... DO UPDATE``) and Postgres both run. On a
``postgresql://`` log the writer goes through :class:`.store_postgres.PgConnection`, whose
dialect layer (:mod:`.dialect`) only turns the ``?`` parameters into ``%s``.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from sqlite_utils import Database

from promptcache.errors import StoreError

from .dialect import is_postgres_url
from .redact import redact_text

if TYPE_CHECKING:
    from .record import RequestRecord

__all__ = [
    "PREFIX_COLUMNS",
    "PREFIX_TABLE",
    "PREFIX_UPSERT",
    "PrefixStore",
    "StoredPrefix",
    "add_prefix_bodies",
    "costliest_prefixes",
    "stored_models",
]

logger = logging.getLogger("promptcache.proxy.prefix_store")

#: The table of representative bodies, one row per prefix family.
PREFIX_TABLE: Final = "prefix_bodies"

#: Key columns hold ``''`` for a request without a key or model (Postgres refuses NULL in a
#: primary key; the rollups store NULL text keys as ``''`` too).
_DDL: Final = f"""
CREATE TABLE IF NOT EXISTS {PREFIX_TABLE} (
    key_fingerprint TEXT NOT NULL,
    model TEXT NOT NULL,
    prefix_family TEXT NOT NULL,
    api TEXT NOT NULL,
    request_id TEXT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (key_fingerprint, model, prefix_family)
)
"""

#: The columns of ``prefix_bodies``, in :data:`PREFIX_UPSERT`'s order.
PREFIX_COLUMNS: Final = (
    "key_fingerprint",
    "model",
    "prefix_family",
    "api",
    "request_id",
    "started_at",
    "body",
)

#: Insert one body, or replace the family's when it is at least as recent (``?`` parameters in
#: :data:`PREFIX_COLUMNS` order; ``log copy`` writes a source log's bodies with it too).
PREFIX_UPSERT: Final = f"""
INSERT INTO {PREFIX_TABLE} ({", ".join(PREFIX_COLUMNS)})
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key_fingerprint, model, prefix_family) DO UPDATE SET
    api = excluded.api, request_id = excluded.request_id,
    started_at = excluded.started_at, body = excluded.body
WHERE excluded.started_at >= {PREFIX_TABLE}.started_at
"""


def add_prefix_bodies(db: Database) -> None:
    """Schema step 11: create ``prefix_bodies`` (empty until a proxy runs with
    ``--store-prefixes``). Idempotent."""
    db.execute(_DDL)


@dataclass
class _Pending:
    api: str
    request_id: str
    started_at: float
    body: bytes
    secrets: tuple[str, ...]


class PrefixStore:
    """Keeps the latest request body of each prefix family in the log (module docstring).

    Args:
        path: the request log (a SQLite file or a ``postgresql://`` URL), already migrated
            (``RequestStore`` opens it first).
        flush_interval_s: waiting bodies are written at least this often (seconds).

    Raises:
        StoreError: the log cannot be opened.

    Call ``start()`` before ``offer()`` and ``close()`` at shutdown.
    """

    def __init__(self, path: Path | str, *, flush_interval_s: float = 0.5) -> None:
        from .store import open_log

        self.path: Path | str = str(path) if is_postgres_url(path) else Path(path)
        self.flush_interval_s = flush_interval_s
        open_log(self.path).close()  # fail now on a bad file, not in the thread
        self._pending: dict[tuple[str, str, str], _Pending] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name="promptcache-prefix-writer", daemon=True
        )
        #: rows upserted so far (a family written twice counts twice)
        self.written_rows = 0
        #: bodies that could not be written (logged with their request id), and those a stop
        #: could not write while a Postgres server was away
        self.failed_rows = 0
        #: ``time.monotonic()`` since which a Postgres log's writes keep failing, else None
        self.failing_since: float | None = None
        self._warned_at = 0.0

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def offer(
        self,
        *,
        key_fingerprint: str | None,
        model: str | None,
        prefix_family: str | None,
        api: str | None,
        request_id: str,
        started_at: float,
        body: bytes,
        secrets: Sequence[str],
    ) -> bool:
        """Keep ``body`` as its family's representative unless a later one is waiting.

        Never blocks on the disk. Returns False (nothing kept) for a request without a
        family or an API, or with an empty body.
        """
        if not prefix_family or not api or not body:
            return False
        key = (key_fingerprint or "", model or "", prefix_family)
        item = _Pending(api, request_id, started_at, body, tuple(secrets))
        with self._lock:
            waiting = self._pending.get(key)
            if waiting is None or started_at >= waiting.started_at:
                self._pending[key] = item
        return True

    def offer_record(self, record: RequestRecord, body: bytes, secrets: Sequence[str]) -> bool:
        """:meth:`offer` a finished request: kept only when it succeeded (2xx status, no
        error). ``body`` is the request body as the client sent it; ``secrets`` the
        credentials to redact (the request's keys and the proxy's auth token)."""
        status = record.status
        if status is None or not 200 <= status < 300 or record.error is not None:
            return False
        return self.offer(
            key_fingerprint=record.key_fingerprint,
            model=record.model,
            prefix_family=record.prefix_family or record.first_segment_hash,
            api=record.api,
            request_id=record.id,
            started_at=record.started_at,
            body=body,
            secrets=secrets,
        )

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Write every waiting body now (on the calling thread); False if the log stayed
        locked for ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self._write_round(final=True):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def close(self, timeout_s: float = 30.0) -> None:
        """Write what is waiting, then stop the writer thread (idempotent)."""
        if self._stopping:
            return
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        else:
            self.flush(timeout_s)

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            self._write_round(final=False)
        if not self.flush():
            self._lost_at_stop()

    def _lost_at_stop(self) -> None:
        """Count and name, in one line, the bodies a stop could not write."""
        with self._lock:
            lost, self._pending = self._pending, {}
        if not lost:
            return
        self.failed_rows += len(lost)
        logger.error(
            "prefix store: %s not written at the stop (the log did not take them; requests %s...)",
            "1 body" if len(lost) == 1 else f"{len(lost)} bodies",
            ", ".join(item.request_id for item in list(lost.values())[:3]),
        )

    def _failing(self, exc: Exception) -> None:
        """One failed round on a Postgres log: one warning when the writes start failing, then
        one a minute (rounds come every ``flush_interval_s``, and faster at a stop)."""
        from .store import FAILING_WARN_EVERY_S  # store.py imports this module

        now = time.monotonic()
        if self.failing_since is None:
            self.failing_since = self._warned_at = now
            logger.warning("prefix store: %s; the bodies stay queued and are tried again", exc)
        elif now - self._warned_at >= FAILING_WARN_EVERY_S:
            self._warned_at = now
            logger.warning(
                "prefix store: writes still failing after %.0f s: %s", now - self.failing_since, exc
            )

    def _written_again(self) -> None:
        if self.failing_since is not None:
            logger.warning(
                "prefix store: writing again after %.0f s of failed writes",
                time.monotonic() - self.failing_since,
            )
            self.failing_since = None

    def _write_round(self, *, final: bool) -> bool:
        """Upsert every waiting body in one transaction; False (bodies kept) when locked."""
        with self._lock:
            batch, self._pending = self._pending, {}
        if not batch:
            return True
        rows = [
            (
                *key,
                item.api,
                item.request_id,
                item.started_at,
                redact_text(item.body.decode("utf-8", "replace"), item.secrets),
            )
            for key, item in batch.items()
        ]
        if isinstance(self.path, str):
            return self._write_postgres(self.path, batch, rows)
        try:
            conn = sqlite3.connect(str(self.path), timeout=1.0 if not final else 5.0)
        except sqlite3.Error as exc:
            self._requeue(batch)
            logger.warning("prefix store: cannot open %s (%s); retrying", self.path, exc)
            return False
        try:
            with conn:
                conn.executemany(PREFIX_UPSERT, rows)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                self._requeue(batch)
                return False
            self._fail(batch, exc)
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            self._fail(batch, exc)
        else:
            self.written_rows += len(rows)
        finally:
            conn.close()
        return True

    def _write_postgres(
        self,
        url: str,
        batch: dict[tuple[str, str, str], _Pending],
        rows: Sequence[tuple[object, ...]],
    ) -> bool:
        """:meth:`_write_round` on a Postgres log: one transaction per round; a server that
        cannot be reached or a lost connection keeps the bodies for the next round."""
        import psycopg

        from .store import one_line  # store.py imports this module
        from .store_postgres import PgConnection, redact_url, server_away

        try:
            conn = PgConnection(url)
        except StoreError as exc:
            self._requeue(batch)
            self._failing(exc)
            return False
        try:
            for row in rows:
                conn.execute(PREFIX_UPSERT, row)
            conn.commit()
        except (StoreError, psycopg.Error) as exc:  # psycopg's own: from the commit
            cause = exc.__cause__ if isinstance(exc, StoreError) else exc
            if not isinstance(exc, StoreError):  # a StoreError names the log already
                exc = StoreError(f"the request log {redact_url(url)}: {one_line(exc)}")
            if cause is not None and server_away(cause):
                self._requeue(batch)
                self._failing(exc)
                return False
            self._fail(batch, exc)
        else:
            self.written_rows += len(rows)
            self._written_again()
        finally:
            conn.close()
        return True

    def _requeue(self, batch: dict[tuple[str, str, str], _Pending]) -> None:
        with self._lock:
            for key, item in batch.items():
                waiting = self._pending.get(key)
                if waiting is None or item.started_at > waiting.started_at:
                    self._pending[key] = item

    def _fail(self, batch: dict[tuple[str, str, str], _Pending], exc: Exception) -> None:
        self.failed_rows += len(batch)
        logger.error(
            "prefix store: %d bodies could not be written (%s; requests %s)",
            len(batch),
            exc,
            ", ".join(item.request_id for item in list(batch.values())[:3]),
        )


@dataclass(frozen=True)
class StoredPrefix:
    """A prefix family's stored body and its cost over the whole log.

    Attributes:
        key_fingerprint, model, prefix_family: the family (None for no key / no model).
        api: the body's wire format (``openai_chat``, ``openai_completions``, ``anthropic``...).
        request_id, started_at: the request the body is from (unix s).
        body: the request body as stored (redacted JSON text).
        requests, cache_read_tokens, total_input_tokens, cost_usd: the family's requests in
            the log and their tokens and spend (USD over priced requests), from the report's
            own per-family query (:func:`.report.page_sql.family_cost`).
    """

    key_fingerprint: str | None
    model: str | None
    prefix_family: str
    api: str
    request_id: str
    started_at: float
    body: str
    requests: int
    cache_read_tokens: int
    total_input_tokens: int
    cost_usd: float


def costliest_prefixes(
    conn: sqlite3.Connection,
    top: int | None,
    *,
    apis: Iterable[str] | None = None,
    models: Iterable[str] | None = None,
) -> list[StoredPrefix]:
    """The ``top`` (None: all) costliest prefix families that have a stored body, costliest
    first.

    Every stored family (of one of ``apis`` and ``models``, when given) is costed over the
    whole log with the report's per-family query; they rank by USD cost (what the report's
    families table shows), then by input tokens (what ranks families whose model has no
    price, such as a local engine without ``--price-as``), then by requests, then by family id.

    Raises:
        StoreError: the log has no ``prefix_bodies`` table (written before schema step 11).
    """
    from .report.page_sql import family_cost  # here: the report package imports the store

    try:
        stored = conn.execute(
            f"SELECT key_fingerprint, model, prefix_family, api, request_id, started_at, body"
            f" FROM {PREFIX_TABLE}"
        ).fetchall()
    except sqlite3.OperationalError as exc:
        raise StoreError(f"the log has no {PREFIX_TABLE} table ({exc})") from None
    api_set = None if apis is None else set(apis)
    model_set = None if models is None else set(models)
    span = conn.execute("SELECT MIN(started_at), MAX(started_at) FROM requests").fetchone()
    t0, t1 = (0.0, 1.0) if span[0] is None else (float(span[0]), float(span[1]) + 1.0)
    ranked: list[StoredPrefix] = []
    for key, model, family, api, request_id, started_at, body in stored:
        if api_set is not None and api not in api_set:
            continue
        if model_set is not None and model not in model_set:
            continue
        cost = family_cost(conn, t0, t1, (key or None, model or None, family))
        ranked.append(
            StoredPrefix(
                key_fingerprint=key or None,
                model=model or None,
                prefix_family=family,
                api=api,
                request_id=request_id,
                started_at=float(started_at),
                body=body,
                requests=int(cost.requests),
                cache_read_tokens=int(cost.cache_read_tokens),
                total_input_tokens=int(cost.total_input_tokens),
                cost_usd=float(cost.cost_usd),
            )
        )
    ranked.sort(key=lambda p: (-p.cost_usd, -p.total_input_tokens, -p.requests, p.prefix_family))
    return ranked if top is None else ranked[:top]


def stored_models(conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
    """(model, api, families) of the stored bodies, most families first (for messages)."""
    sql = f"""
        SELECT model, api, COUNT(*) AS n FROM {PREFIX_TABLE}
        GROUP BY model, api ORDER BY n DESC, model, api
    """
    return [(str(m), str(a), int(n)) for m, a, n in conn.execute(sql)]
