"""The request log's SQL dialects: the SQL is written once, for SQLite, and this module turns it
into the Postgres SQL that means the same (the log's second backend, :mod:`.store_postgres`).

The migrations (:mod:`.store`, :mod:`.rollup`, :mod:`.replica_rollup`) and the report queries
(:mod:`.report.queries`, :mod:`.report.page_sql`, ...) are SQLite text. :func:`to_postgres`
rewrites the few constructs whose spelling or meaning differs, on a token tree (string literals,
quoted names and comments are never touched):

========================================  ==================================================
SQLite                                    Postgres
========================================  ==================================================
``:name`` / ``?`` parameters              ``%(name)s`` / ``%s`` (psycopg's; ``%`` in literals
                                          doubled)
``x IS y`` / ``x IS NOT y`` (y not NULL)  ``x IS NOT DISTINCT FROM y`` / ``IS DISTINCT FROM``
scalar ``MAX(a, b)`` / ``MIN(a, b)``      ``GREATEST(a, b)`` / ``LEAST(a, b)``
``TOTAL(x)``                              ``COALESCE(SUM(x), 0)``
``CAST(x AS INTEGER)`` (truncates)        ``CAST(TRUNC(x) AS BIGINT)`` (Postgres rounds)
``CAST(x AS REAL)``, a ``REAL`` column    ``DOUBLE PRECISION`` (Postgres' REAL is 4 bytes)
an ``INTEGER`` column                     ``BIGINT`` (token sums pass 2^31)
``strftime(fmt, x, 'unixepoch')``         ``to_char(to_timestamp(x) AT TIME ZONE 'UTC', fmt)``
``INDEXED BY name``                       dropped (Postgres' planner picks indexes itself)
a subquery in FROM/JOIN without alias     the same with ``AS _q1``, ``_q2``... (required)
========================================  ==================================================

SQL that uses a boolean as a number (``SUM(a > 0)``) is written portably at its source instead
(``CASE WHEN a > 0 THEN 1 ELSE 0 END``): no rewrite can know an expression's type.

Sources: Postgres 15 manual, "Conditional Expressions" (GREATEST/LEAST), "Comparison Functions
and Operators" (IS DISTINCT FROM), "Numeric Types" (REAL is 4 bytes; casting a float to an
integer rounds), "Data Type Formatting Functions" (to_char), "FROM clause" (a sub-SELECT must
have an alias before version 16), https://www.postgresql.org/docs/15/ ; SQLite "Core Functions"
(multi-argument max/min, total) and "CAST expressions" (truncation toward zero),
https://www.sqlite.org/lang_corefunc.html ; psycopg 3 "Passing parameters to SQL queries",
https://www.psycopg.org/psycopg3/docs/basic/params.html ; all checked 2026-12-03.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["POSTGRES_SCHEMES", "is_postgres", "is_postgres_url", "log_url_problem", "to_postgres"]

#: URL schemes that name a Postgres log (libpq's two spellings).
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")


#: ``scheme://`` at the start of a value: a URL, whatever its scheme (RFC 3986's scheme chars)
_URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def log_url_problem(value: str) -> str | None:
    """What is wrong with a ``--db`` / ``[log] db`` value that is a URL but not a Postgres one
    (``postgresql+psycopg://``, ``mysql://``, ``sqlite:///x.db``, a misspelt scheme), which
    would otherwise be taken for a SQLite path (its ``//`` folded, its password printed);
    None for a Postgres URL or a path. The URL is shown with its password masked."""
    found = _URL_SCHEME.match(value)
    if found is None or is_postgres_url(value):
        return None
    from .redact import redact_url

    scheme, shown = found.group(1).lower(), redact_url(value)
    if scheme.startswith(("postgresql+", "postgres+")):
        base, driver = scheme.split("+", 1)
        return (
            f"{shown} names a SQLAlchemy driver; the log takes libpq's URL: drop '+{driver}' "
            f"({base}://user@host/dbname)"
        )
    if scheme == "sqlite":
        return f"{shown}: a SQLite log is given by its file path, not a sqlite:// URL"
    return (
        f"{shown} is a {scheme}:// URL; the log is a SQLite file path or a "
        "postgresql://user@host/dbname URL"
    )


def is_postgres_url(value: object) -> bool:
    """Whether a ``--db`` / ``[log] db`` value names a Postgres database (else: a SQLite path)."""
    return isinstance(value, str) and value.lower().startswith(POSTGRES_SCHEMES)


def is_postgres(db: object) -> bool:
    """Whether a log connection or database (``sqlite3``/``sqlite_utils`` or the Postgres
    adapters of :mod:`.store_postgres`) is a Postgres one."""
    return getattr(db, "dialect", None) == "postgres"


_TOKEN: Final = re.compile(
    r"""(?P<ws>\s+)
      | (?P<comment>--[^\n]*|/\*.*?\*/)
      | (?P<string>'(?:[^']|'')*')
      | (?P<quoted>"(?:[^"]|"")*")
      | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)
      | (?P<param>:[A-Za-z_]\w*|\?)
      | (?P<word>[A-Za-z_][\w$]*)
      | (?P<op><>|!=|<=|>=|\|\||.)""",
    re.VERBOSE | re.DOTALL,
)

#: Words after which a parenthesised sub-SELECT is a FROM item (needs an alias in Postgres).
_FROM_WORDS: Final = frozenset({"FROM", "JOIN"})
#: Words that may follow a FROM item and are not its alias.
_NOT_ALIAS: Final = frozenset(
    {"WHERE", "GROUP", "ORDER", "LEFT", "RIGHT", "FULL", "INNER", "CROSS", "JOIN", "ON",
     "UNION", "EXCEPT", "INTERSECT", "LIMIT", "OFFSET", "HAVING", "WINDOW", "USING", "NATURAL"}
)  # fmt: skip
#: strftime conversions -> to_char patterns.
_STRFTIME: Final = (("%Y", "YYYY"), ("%m", "MM"), ("%d", "DD"), ("%H", "HH24"), ("%M", "MI"),
                    ("%S", "SS"))  # fmt: skip


class _Group(list["_Node"]):
    """A parenthesised group: its nodes, the brackets included."""


_Node = str | _Group


def _parse(sql: str) -> list[_Node]:
    stack: list[list[_Node]] = [[]]
    pos = 0
    while pos < len(sql):
        match = _TOKEN.match(sql, pos)
        if match is None:  # pragma: no cover - the op branch matches any character
            raise ValueError(f"cannot read SQL at {pos}: {sql[pos : pos + 20]!r}")
        text = match.group()
        pos = match.end()
        if text == "(":
            group = _Group([text])
            stack[-1].append(group)
            stack.append(group)
        elif text == ")" and len(stack) > 1:
            stack.pop().append(text)
        else:
            stack[-1].append(text)
    return stack[0]


def _is_space(node: _Node) -> bool:
    return isinstance(node, str) and (node.isspace() or node.startswith(("--", "/*")))


def _next(nodes: list[_Node], i: int) -> int:
    """Index of the first node at or after ``i`` that is not blank (len(nodes) if none)."""
    while i < len(nodes) and _is_space(nodes[i]):
        i += 1
    return i


def _word(node: _Node | None) -> str:
    return node.upper() if isinstance(node, str) and node[:1].isalpha() else ""


def _args(group: _Group) -> list[list[_Node]]:
    """The top-level comma-separated arguments inside ``group`` (brackets excluded)."""
    out: list[list[_Node]] = [[]]
    for node in group[1:-1]:
        if node == ",":
            out.append([])
        else:
            out[-1].append(node)
    return out


class _Translator:
    def __init__(self, parameters: bool) -> None:
        self.aliases = 0
        self.parameters = parameters

    def render(self, nodes: list[_Node]) -> str:
        return "".join(self.node(n) if isinstance(n, _Group) else n for n in self.rewrite(nodes))

    def node(self, group: _Group) -> str:
        return "(" + self.render(group[1:-1]) + (")" if group[-1] == ")" else str(group[-1]))

    def args(self, group: _Group) -> list[str]:
        return [self.render(arg).strip() for arg in _args(group)]

    def rewrite(self, nodes: list[_Node]) -> list[_Node]:
        out: list[_Node] = []
        i = 0
        previous = ""  # the last non-blank word seen
        while i < len(nodes):
            node = nodes[i]
            word = _word(node)
            j = _next(nodes, i + 1)
            following = nodes[j] if j < len(nodes) else None
            if isinstance(node, _Group):
                out.append(node)
                inner = _next(node, 1)
                if previous in _FROM_WORDS and _word(node[inner]) in ("SELECT", "WITH"):
                    after = _word(following)
                    if (following is None or not after or after in _NOT_ALIAS) and after != "AS":
                        self.aliases += 1
                        out.append(f" AS _q{self.aliases}")
                previous = ""
                i += 1
                continue
            if isinstance(node, str) and node.startswith(":") and len(node) > 1:
                out.append(f"%({node[1:]})s")
            elif node == "?":
                out.append("%s")
            elif isinstance(node, str) and node.startswith("'") and self.parameters:
                out.append(node.replace("%", "%%"))
            elif word == "INDEXED" and _word(following) == "BY":
                i = _next(nodes, _next(nodes, j + 1) + 1)  # INDEXED BY name: dropped
                continue
            elif word == "IS":
                k = _next(nodes, j + 1)
                if _word(following) == "NOT" and _word(nodes[k] if k < len(nodes) else None) \
                        not in ("NULL", "TRUE", "FALSE"):  # fmt: skip
                    out.append("IS DISTINCT FROM")
                    i = j + 1
                    previous = "FROM"
                    continue
                if _word(following) not in ("NULL", "NOT", "TRUE", "FALSE"):
                    out.append("IS NOT DISTINCT FROM")
                else:
                    out.append(node)
            elif word in ("MAX", "MIN") and isinstance(following, _Group) \
                    and len(_args(following)) > 1:  # fmt: skip
                name = "GREATEST" if word == "MAX" else "LEAST"
                out.append(f"{name}({', '.join(self.args(following))})")
                i = j + 1
                continue
            elif word == "TOTAL" and isinstance(following, _Group):
                out.append(f"COALESCE(SUM({self.render(following[1:-1])}), 0)")
                i = j + 1
                continue
            elif word == "CAST" and isinstance(following, _Group):
                out.append(self.cast(following))
                i = j + 1
                continue
            elif word == "STRFTIME" and isinstance(following, _Group):
                out.append(self.strftime(following))
                i = j + 1
                continue
            elif word == "REAL":
                out.append("DOUBLE PRECISION")
            elif word == "INTEGER":
                out.append("BIGINT")
            else:
                out.append(node)
            if word:
                previous = word
            elif not _is_space(node):
                previous = ""
            i += 1
        return _null_order(out)

    def cast(self, group: _Group) -> str:
        inner = group[1:-1]
        split = max(k for k, n in enumerate(inner) if _word(n) == "AS")
        expr = self.render(inner[:split]).strip()
        kind = " ".join(_word(n) or str(n) for n in inner[split + 1 :] if not _is_space(n))
        if kind == "INTEGER":
            return f"CAST(TRUNC({expr}) AS BIGINT)"
        if kind == "REAL":
            return f"CAST({expr} AS DOUBLE PRECISION)"
        return f"CAST({expr} AS {kind})"

    def strftime(self, group: _Group) -> str:
        args = self.args(group)
        if len(args) != 3 or args[2].lower() != "'unixepoch'" or not args[0].startswith("'"):
            raise ValueError(f"strftime{self.node(group)} has no Postgres translation")
        pattern = args[0]
        for ours, theirs in _STRFTIME:
            pattern = pattern.replace(ours.replace("%", "%%") if self.parameters else ours, theirs)
        return f"to_char(to_timestamp({args[1]}) AT TIME ZONE 'UTC', {pattern})"


#: Words that end an ORDER BY list.
_ORDER_END: Final = frozenset(
    {"LIMIT", "OFFSET", "UNION", "EXCEPT", "INTERSECT", "FETCH", "ON", "FOR", "WINDOW"}
)


def _null_order(out: list[_Node]) -> list[_Node]:
    """Give each ``ORDER BY`` item, and each column of a ``CREATE INDEX ... ON t (...)``,
    SQLite's NULL order (NULLs first ascending, last descending; Postgres' default is the
    reverse), unless it names one. Indexes and queries then agree, so an index still serves
    an ``ORDER BY`` in either direction."""
    words = [_word(n) for n in out]
    result: list[_Node] = []
    i = 0
    index_columns = -1  # position of the column group of CREATE INDEX ... ON name (...)
    if words[:1] == ["CREATE"] or "INDEX" in words[:6]:
        k = next((k for k, w in enumerate(words) if w == "ON"), -1)
        if k >= 0:
            index_columns = next(
                (j for j in range(k + 1, len(out)) if isinstance(out[j], _Group)), -1
            )
    while i < len(out):
        node = out[i]
        if i == index_columns and isinstance(node, _Group):
            node = _Group(["(", *_join(_ordered(item) for item in _args(node)), ")"])
            result.append(node)
            i += 1
            continue
        if words[i] == "ORDER" and i + 2 < len(out) and words[_next(out, i + 1)] == "BY":
            j = _next(out, i + 1) + 1
            result.extend(out[i:j])
            end = j
            while end < len(out) and words[end] not in _ORDER_END:
                end += 1
            order: list[list[_Node]] = [[]]
            for n in out[j:end]:
                if n == ",":
                    order.append([])
                else:
                    order[-1].append(n)
            result.extend(_join(_ordered(item) for item in order))
            if end < len(out):
                result.append(" ")
            i = end
            continue
        result.append(node)
        i += 1
    return result


def _ordered(item: list[_Node]) -> list[_Node]:
    meaningful = [_word(n) for n in item if not _is_space(n)]
    if not meaningful or "NULLS" in meaningful:
        return item
    while item and _is_space(item[-1]):
        item = item[:-1]
    return [*item, " NULLS LAST" if meaningful[-1] == "DESC" else " NULLS FIRST"]


def _join(items: Iterable[list[_Node]]) -> list[_Node]:
    out: list[_Node] = []
    for k, item in enumerate(items):
        if k:
            out.append(",")
        out.extend(item)
    return out


@functools.lru_cache(maxsize=512)
def to_postgres(sql: str, *, parameters: bool = True) -> str:
    """``sql`` (SQLite, with ``:name`` or ``?`` parameters) as Postgres SQL for psycopg (see the
    module docstring's table). Execute the result with parameters (a dict or sequence, empty
    when there are none), so that psycopg reads its ``%%`` back as ``%``; with
    ``parameters=False`` the result is plain SQL (no placeholders, ``%`` left single), for
    function bodies.

    Raises:
        ValueError: a construct without a translation (``strftime`` other than ``'unixepoch'``).
    """
    return _Translator(parameters).render(_parse(sql))
