"""Reading one JSON object from a command's FILE|- argument, with errors that say what to fix."""

from __future__ import annotations

import json
from typing import IO, Any

import click


def read_json_object(stream: IO[str], *, param_hint: str, what: str) -> dict[str, Any]:
    """Parse ``stream`` as one JSON object (a request or response body).

    Args:
        stream: an open text stream (click.File with encoding ``utf-8-sig``, so a BOM is fine).
        param_hint: the argument's name as shown in ``--help`` (``FILE``, ``USAGE_JSON``).
        what: how to name the expected object in the error (``a request body``).

    Raises:
        click.BadParameter: not JSON, nested too deeply, not UTF-8, or not an object; click
            prints it as a usage error with exit status 2, never a traceback.
    """
    try:
        payload = json.load(stream)
    except json.JSONDecodeError as exc:
        if not exc.doc.strip():  # 'Expecting value: line 1 column 1 (char 0)' says nothing here
            raise click.BadParameter(
                f"the input is empty; expected a JSON object ({what})", param_hint=param_hint
            ) from None
        head = exc.doc.lstrip()
        if head.startswith(("data:", "event:", ":")):  # a saved stream (curl -N)
            example = ", e.g. the data of the event that carries the final usage"
            raise click.BadParameter(
                "this is a streamed response (server-sent events), not one JSON object; pass "
                f"{what} as JSON{example if 'usage' in what else ''}",
                param_hint=param_hint,
            ) from None
        if exc.msg == "Extra data":  # JSON Lines, or two bodies in one file
            raise click.BadParameter(
                f"more text after the first JSON value, at line {exc.lineno} column {exc.colno} "
                f"(JSON Lines, or two bodies in one file?); pass one JSON object ({what})",
                param_hint=param_hint,
            ) from None
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint=param_hint) from None
    except RecursionError:
        raise click.BadParameter(
            "JSON nested too deeply to read; no vendor accepts such a body", param_hint=param_hint
        ) from None
    except UnicodeDecodeError as exc:
        raise click.BadParameter(
            f"not UTF-8 text ({exc.reason} at byte {exc.start}); save the JSON as UTF-8",
            param_hint=param_hint,
        ) from None
    if not isinstance(payload, dict):
        raise click.BadParameter(
            f"expected a JSON object ({what}), got {type(payload).__name__}",
            param_hint=param_hint,
        )
    return payload
