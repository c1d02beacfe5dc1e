"""The client-limit options ``promptcache proxy`` and ``promptcache engine serve`` share
(``promptcache.client_limits``); the command builds its ``ClientLimits`` from them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from promptcache.client_limits import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEAD_TIMEOUT_S,
    DEFAULT_KEEP_ALIVE_S,
)

from ._numbers import FiniteFloatRange

__all__ = ["Seconds", "client_limit_options"]

F = TypeVar("F", bound=Callable[..., Any])


class Seconds(FiniteFloatRange):
    """A finite number of seconds, above 0 (``min_open``) or from 0: ``nan`` and ``inf`` would
    fail inside the event loop's timers, a traceback on the first request or at the stop
    rather than a usage error."""

    def __init__(self, *, min_open: bool) -> None:
        super().__init__(min=0, min_open=min_open, unit="seconds")


_SECONDS = Seconds(min_open=True)


def client_limit_options(function: F) -> F:
    """Add ``--header-timeout``, ``--body-timeout``, ``--keep-alive-timeout`` and
    ``--max-client-connections`` to a server command."""
    options = [
        click.option(
            "--header-timeout",
            "header_timeout_s",
            type=_SECONDS,
            default=DEFAULT_HEAD_TIMEOUT_S,
            show_default=True,
            metavar="SECONDS",
            help="A client whose request line and headers are not complete in this time gets "
            "408 and is disconnected (slow clients cannot hold connections).",
        ),
        click.option(
            "--body-timeout",
            "body_timeout_s",
            type=_SECONDS,
            default=DEFAULT_BODY_TIMEOUT_S,
            show_default=True,
            metavar="SECONDS",
            help="The same for the request body, counted from the end of the headers.",
        ),
        click.option(
            "--keep-alive-timeout",
            "keep_alive_s",
            type=_SECONDS,
            default=DEFAULT_KEEP_ALIVE_S,
            show_default=True,
            metavar="SECONDS",
            help="An idle keep-alive connection is closed after this time.",
        ),
        click.option(
            "--max-client-connections",
            "max_client_connections",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help="Client connections open at once; at the limit a new one replaces the one "
            "waiting longest for a request, or gets 503 if all are busy. Default: what the "
            "open-files limit (ulimit -n, raised to its hard limit) leaves room for, at most "
            "4096.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function
