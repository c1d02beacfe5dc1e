"""``PrefixGuard``: remember each request's fingerprint and report when its cached prefix changes.

Call ``guard.check(body, api)`` before (or after) sending each request. The guard stores the
latest fingerprint per key in a JSON file or an SQLite database and returns a ``Divergence``
when the new request no longer shares the stored one's cacheable prefix, naming the first
changed segment, the JSON path inside it (``system[1].text``), the character offset and a
before/after excerpt. Typical causes: a timestamp in the system prompt, a reordered tool list,
a per-user value in frozen text.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from promptcache.errors import ConfigError
from promptcache.fingerprint import (
    Divergence,
    RequestFingerprint,
    fingerprint_request,
    first_divergence,
)

__all__ = ["PrefixGuard"]

_JSON_FORMAT = "promptcache.prefix_guard/1"
_SQLITE_SUFFIXES = frozenset({".db", ".sqlite", ".sqlite3"})
_TABLE = "prefix_fingerprints"


class PrefixGuard:
    """Stores the last fingerprint per key and reports the first change in the cached prefix.

    Args:
        path: where to keep fingerprints. A ``.json`` file (rewritten atomically on each check)
            or an SQLite database (``.db``, ``.sqlite``, ``.sqlite3``; table
            ``prefix_fingerprints`` with columns key, api, model, prefix_hash, fingerprint).
            Created on first use.
        scope: ``"cached_prefix"`` (default) ignores changes after the last cache breakpoint of
            both requests (those segments are not cached anyway, e.g. the dynamic question);
            with no breakpoints in a request every segment counts (OpenAI and Gemini cache
            automatically). ``"all"`` reports any change.

    Appending segments (history growing) is never reported: the old prefix is still a prefix.

    Raises:
        ConfigError: unsupported file suffix or unknown ``scope``; later, an unreadable store.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        scope: Literal["cached_prefix", "all"] = "cached_prefix",
    ) -> None:
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix != ".json" and suffix not in _SQLITE_SUFFIXES:
            raise ConfigError(
                f"PrefixGuard path {self.path} must end in .json (JSON file) or .db/.sqlite/"
                ".sqlite3 (SQLite database)"
            )
        if scope not in ("cached_prefix", "all"):
            raise ConfigError(f"PrefixGuard scope must be 'cached_prefix' or 'all', not {scope!r}")
        self.scope = scope
        self._sqlite = suffix in _SQLITE_SUFFIXES

    def check(
        self, body: Mapping[str, Any], api: str = "auto", *, key: str = "default"
    ) -> Divergence | None:
        """Fingerprint ``body``, compare it with the stored one for ``key``, then store it.

        Args:
            body: the request body (see ``fingerprint_request``).
            api: its API name, or ``"auto"``.
            key: which stream of requests this is (a prompt name, a tenant); each key keeps its
                own last fingerprint.

        Returns:
            The first divergence inside the watched prefix, or None when there is none (or no
            fingerprint was stored for ``key`` yet).

        Raises:
            RequestShapeError, CanonicalizationError: as ``fingerprint_request``.
            ConfigError: the store cannot be read or written, or ``key`` is not a str (the JSON
                file keeps keys as text, so ``key=7`` would never find what it stored).
        """
        _check_key(key)
        new = fingerprint_request(body, api)
        old = self.last(key)
        self._store(key, new)
        if old is None:
            return None
        divergence = first_divergence(old, new)
        if divergence is None or divergence.change == "added":
            return None
        if self.scope == "cached_prefix":
            watched = max(_last_cached_index(old), _last_cached_index(new))
            if divergence.index > watched:
                return None
        return divergence

    def last(self, key: str = "default") -> RequestFingerprint | None:
        """The stored fingerprint for ``key``, or None."""
        _check_key(key)
        data = self._load_sqlite(key) if self._sqlite else self._load_json().get(key)
        return None if data is None else RequestFingerprint.from_dict(data)

    # -- storage -------------------------------------------------------------------------------

    def _load_json(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read PrefixGuard file {self.path}: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != _JSON_FORMAT:
            raise ConfigError(
                f"{self.path} is not a PrefixGuard file (no format {_JSON_FORMAT!r}); "
                "choose another path"
            )
        entries = data.get("entries")
        return entries if isinstance(entries, dict) else {}

    def _store(self, key: str, fp: RequestFingerprint) -> None:
        if self._sqlite:
            self._store_sqlite(key, fp)
            return
        entries = self._load_json()
        entries[key] = fp.to_dict()
        payload = json.dumps({"format": _JSON_FORMAT, "entries": entries}, ensure_ascii=False)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(payload)
            os.replace(tmp, self.path)
        except OSError as exc:
            raise ConfigError(f"cannot write PrefixGuard file {self.path}: {exc}") from None

    def _db(self) -> Any:
        import sqlite_utils

        self.path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite_utils.Database(self.path)

    def _load_sqlite(self, key: str) -> dict[str, Any] | None:
        try:
            db = self._db()
            try:
                if _TABLE not in db.table_names():
                    return None
                rows = list(db[_TABLE].rows_where("key = ?", [key]))
            finally:
                db.close()
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot read PrefixGuard database {self.path}: {exc}") from None
        if not rows:
            return None
        loaded: dict[str, Any] = json.loads(rows[0]["fingerprint"])
        return loaded

    def _store_sqlite(self, key: str, fp: RequestFingerprint) -> None:
        row = {
            "key": key,
            "api": fp.api,
            "model": fp.model,
            "prefix_hash": fp.prefix_hash,
            "fingerprint": json.dumps(fp.to_dict(), ensure_ascii=False),
        }
        try:
            db = self._db()
            try:
                with db.conn:
                    db[_TABLE].upsert(row, pk="key")
            finally:
                db.close()
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot write PrefixGuard database {self.path}: {exc}") from None


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        raise ConfigError(
            f"PrefixGuard key must be a str (a prompt name or a tenant), got "
            f"{type(key).__name__} {key!r}: a JSON store keeps keys as text, so it would never "
            "find the fingerprint stored under it again; pass str(key)"
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"PrefixGuard key {key!r} holds a lone surrogate "
            f"({key[exc.start : exc.end]!r} at character {exc.start}), which neither store "
            "can write; fix the text's decoding"
        ) from None


def _last_cached_index(fp: RequestFingerprint) -> int:
    """Index of the last segment inside a cached prefix; every segment when no breakpoints."""
    if not fp.breakpoints:
        return len(fp.segments) - 1
    return max(bp.segment_index for bp in fp.breakpoints)
