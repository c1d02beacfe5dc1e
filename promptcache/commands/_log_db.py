"""The ``--db`` value of ``proxy``, ``report`` and ``log``: a SQLite file, or a Postgres URL.

A value starting with ``postgresql://`` or ``postgres://`` names a Postgres database (the shared
log of several proxies) and is kept as the string it is; anything else is a SQLite file path.
click's own ``Path`` type would fold the URL's ``//`` into one slash.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # click >= 8.2 makes ParamType generic; older ones cannot be subscripted
    _ParamType = click.ParamType[Path | str, Any]
else:
    _ParamType = click.ParamType

__all__ = ["LOG_DB", "LogDb", "is_postgres_url"]

#: URL prefixes that name a Postgres log (libpq's two spellings; also ``proxy/dialect.py``).
_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(value: object) -> bool:
    """Whether ``value`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(value, str) and value.lower().startswith(_SCHEMES)


class LogDb(_ParamType):
    """``--db``: a ``postgresql://`` URL (str) or a SQLite file (``Path``)."""

    name = "FILE|postgresql://URL"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Path | str:
        if isinstance(value, Path):
            return value
        text = str(value)
        if is_postgres_url(text):
            return text
        if not text:
            self.fail("give a SQLite file or a postgresql:// URL", param, ctx)
        if "://" in text:  # another scheme's URL, not a file: say so (its password masked)
            from promptcache.proxy.dialect import log_url_problem

            problem = log_url_problem(text)
            if problem is not None:
                self.fail(problem, param, ctx)
        return Path(text)


LOG_DB = LogDb()
