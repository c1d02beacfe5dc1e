"""``promptcache log``: commands on the proxy's request log itself (``log copy``)."""

from __future__ import annotations

from pathlib import Path

import click

from ._log_db import LOG_DB


@click.group(name="log")
def log_group() -> None:
    """Work on proxy request logs (SQLite files or postgresql:// databases)."""


@log_group.command(name="copy")
@click.argument("src", type=LOG_DB)
@click.argument("dst", type=LOG_DB)
def copy_command(src: Path | str, dst: Path | str) -> None:
    """Copy every request of log SRC into log DST (created if missing), once.

    SRC and DST are SQLite files or postgresql://user@host/dbname URLs: move a proxy's SQLite
    log into the Postgres log a fleet of proxies shares. The copy is one transaction; DST
    records SRC's identity and refuses a second copy of it.

    \b
    Example:
        promptcache log copy promptcache.db postgresql://proxy@db.internal/promptcache
    """
    from promptcache.formatting import plural
    from promptcache.proxy.log_copy import copy_log
    from promptcache.proxy.redact import redact_url

    result = copy_log(src, dst)
    click.echo(
        f"copied {plural(result.rows, 'request', grouped=True)} from {redact_url(str(src))} to "
        f"{redact_url(str(dst))} (recorded there as copied_from:{result.identity[:8]}...; "
        "a second copy of this log is refused)"
    )
    if result.prefix_bodies:
        bodies = result.prefix_bodies
        click.echo(
            f"and {bodies:,} stored prefix bod{'y' if bodies == 1 else 'ies'} (--store-prefixes), "
            "for engine serve --warmup-from-log"
        )
    if result.adopted_salt:
        click.echo(
            "the destination had no requests, so it now uses the source's key salt: key "
            "fingerprints of requests logged by proxies started after the copy match the "
            "copied ones"
        )
