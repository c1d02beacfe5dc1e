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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from promptcache.canonical import canonical_json
from promptcache.errors import ConfigError

try:
    import fcntl
except ImportError:  # not POSIX: one process per JSON store (SQLite still locks)
    fcntl = None  # type: ignore[assignment]
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
    A different ``model`` (``modelId``) or API than the stored request's is reported as a
    change at segment 0 whose ``path`` is ``"model"`` (``"modelId"``, ``"api"``): the vendor
    caches per model, so nothing of the old prefix is read. An Anthropic request whose
    ``tool_choice`` or ``thinking`` differs from the stored one's is reported as a change at
    its first message (``path`` ``"tool_choice"`` or ``"thinking"``): those parameters
    invalidate the cached messages, not the tools and system.

    Raises:
        ConfigError: unsupported file suffix or unknown ``scope``; later, an unreadable store.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        scope: Literal["cached_prefix", "all"] = "cached_prefix",
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise ConfigError(
                f"PrefixGuard path must be a file path (str or Path) ending in .json or .db, "
                f"got {type(path).__name__}"
            )
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
            The first divergence inside the watched prefix (a switch of model or API counts as
            one at segment 0), or None when there is none (or no fingerprint was stored for
            ``key`` yet).

        Raises:
            RequestShapeError, CanonicalizationError: as ``fingerprint_request``.
            ConfigError: the store cannot be read or written, or ``key`` is not a str (the JSON
                file keeps keys as text, so ``key=7`` would never find what it stored).
        """
        _check_key(key)
        new = fingerprint_request(body, api)
        settings = _message_settings(body, new.api)
        stored = {**new.to_dict(), _SETTINGS: settings}
        # read the stored fingerprint and store the new one in one step, under the store's
        # lock, so processes sharing the store (web-server workers) lose no update
        data = self._swap_sqlite(key, new, stored) if self._sqlite else self._swap_json(key, stored)
        old = None if data is None else RequestFingerprint.from_dict(data)
        if old is None:
            return None
        switched = _switch(old, new)
        if switched is not None:
            return switched
        divergence = first_divergence(old, new)
        if divergence is not None and divergence.change == "added":
            divergence = None
        old_settings = data.get(_SETTINGS) if isinstance(data, dict) else None
        if isinstance(old_settings, dict):  # None: stored before settings were kept
            toggled = _settings_change(old_settings, settings, new)
            if toggled is not None and (divergence is None or toggled.index < divergence.index):
                divergence = toggled
        if divergence is None:
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
    #
    # Several processes may share one store. A JSON file is read, updated and replaced under an
    # exclusive lock on a file beside it (``NAME.lock``); an SQLite database does the read and
    # the write in one ``BEGIN IMMEDIATE`` transaction and waits up to 30 s for another
    # writer's lock.

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

    @contextmanager
    def _json_lock(self) -> Iterator[None]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(self.path.with_name(self.path.name + ".lock"), "a")  # noqa: SIM115
        except OSError as exc:
            raise ConfigError(f"cannot write PrefixGuard file {self.path}: {exc}") from None
        with handle:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_EX)
            yield  # the lock goes with the descriptor

    def _swap_json(self, key: str, stored: dict[str, Any]) -> dict[str, Any] | None:
        with self._json_lock():
            entries = self._load_json()
            old = entries.get(key)
            entries[key] = stored
            payload = json.dumps({"format": _JSON_FORMAT, "entries": entries}, ensure_ascii=False)
            tmp = None
            try:
                fd, tmp = tempfile.mkstemp(
                    dir=self.path.parent, prefix=self.path.name, suffix=".tmp"
                )
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(payload)
                os.replace(tmp, self.path)
            except OSError as exc:
                if tmp is not None:
                    Path(tmp).unlink(missing_ok=True)
                raise ConfigError(f"cannot write PrefixGuard file {self.path}: {exc}") from None
        return old

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(self.path, timeout=30.0, isolation_level=None)

    def _load_sqlite(self, key: str) -> dict[str, Any] | None:
        try:
            conn = self._connect()
            try:
                row = conn.execute(
                    f"SELECT fingerprint FROM [{_TABLE}] WHERE key = ?", (key,)
                ).fetchone()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                row = None
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot read PrefixGuard database {self.path}: {exc}") from None
        if row is None:
            return None
        loaded: dict[str, Any] = json.loads(row[0])
        return loaded

    def _swap_sqlite(
        self, key: str, fp: RequestFingerprint, stored: dict[str, Any]
    ) -> dict[str, Any] | None:
        try:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS [{_TABLE}] ([key] TEXT PRIMARY KEY, [api] TEXT, "
                    "[model] TEXT, [prefix_hash] TEXT, [fingerprint] TEXT)"
                )
                row = conn.execute(
                    f"SELECT fingerprint FROM [{_TABLE}] WHERE key = ?", (key,)
                ).fetchone()
                conn.execute(
                    f"INSERT INTO [{_TABLE}] (key, api, model, prefix_hash, fingerprint) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET api = excluded.api, "
                    "model = excluded.model, prefix_hash = excluded.prefix_hash, "
                    "fingerprint = excluded.fingerprint",
                    (
                        key,
                        fp.api,
                        fp.model,
                        fp.prefix_hash,
                        json.dumps(stored, ensure_ascii=False),
                    ),
                )
                conn.execute("COMMIT")
            finally:
                conn.close()  # an open transaction is rolled back
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"cannot write PrefixGuard database {self.path}: {exc}") from None
        if row is None:
            return None
        loaded: dict[str, Any] = json.loads(row[0])
        return loaded


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


def _switch(old: RequestFingerprint, new: RequestFingerprint) -> Divergence | None:
    """A change of model (or of API) between the two requests, as a change at segment 0: the
    vendor keeps its cache per model, so none of the old prefix is read, however alike the
    segments are. A request body without a model (Gemini names it in the URL) is not compared."""
    if old.api != new.api:
        path, before, after = "api", old.api, new.api
    elif old.model is not None and new.model is not None and old.model != new.model:
        path = "modelId" if new.api == "bedrock_converse" else "model"
        before, after = old.model, new.model
    else:
        return None
    return Divergence(
        index=0,
        change="changed",
        segment_path=path,
        path=path,
        offset=0,
        field_offset=None,
        before=json.dumps(before, ensure_ascii=False),
        after=json.dumps(after, ensure_ascii=False),
    )


#: The stored entry's field holding :func:`_message_settings` (beside the fingerprint's own).
_SETTINGS = "message_settings"

#: Request parameters outside the segments whose change invalidates the cached messages, per API:
#: Anthropic's tool_choice and thinking (enabled or not, budget): "tool_choice, adding/removing
#: images and thinking parameters invalidate messages"
#: (https://platform.claude.com/docs/en/build-with-claude/prompt-caching, checked 2026-11-30).
_MESSAGE_SETTINGS: dict[str, tuple[str, ...]] = {"anthropic": ("tool_choice", "thinking")}


def _message_settings(body: Mapping[str, Any], api: str) -> dict[str, str]:
    """The canonical JSON of each of ``body``'s message-invalidating parameters that is set."""
    return {
        name: canonical_json(body[name])
        for name in _MESSAGE_SETTINGS.get(api, ())
        if body.get(name) is not None
    }


def _settings_change(
    old: Mapping[str, Any], new: Mapping[str, str], fp: RequestFingerprint
) -> Divergence | None:
    """A changed message-invalidating parameter, as a change at the first message segment (the
    vendor keeps the tools and system cached, and reads none of the messages)."""
    first = next((i for i, seg in enumerate(fp.segments) if seg.kind == "messages"), None)
    if first is None:
        return None
    for name in _MESSAGE_SETTINGS.get(fp.api, ()):
        before, after = old.get(name), new.get(name)
        if before != after:
            return Divergence(
                index=first,
                change="changed",
                segment_path=fp.segments[first].path,
                path=name,
                offset=0,
                field_offset=None,
                before=_NOT_SET if before is None else str(before),
                after=_NOT_SET if after is None else after,
            )
    return None


_NOT_SET = "(not set)"


def _last_cached_index(fp: RequestFingerprint) -> int:
    """Index of the last segment inside a cached prefix; every segment when no breakpoints."""
    if not fp.breakpoints:
        return len(fp.segments) - 1
    return max(bp.segment_index for bp in fp.breakpoints)
