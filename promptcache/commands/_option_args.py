"""Commands that take no bare arguments, but whose main value a newcomer types as one.

``promptcache report chat.db``, ``promptcache proxy openai`` and ``promptcache engine serve
./model`` were click's ``Got unexpected extra argument (chat.db)`` or ``Missing option
'--model'``, which do not say that the value belongs to an option. :class:`OptionArgCommand`
names the option when a bare argument looks like its value.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ._log_db import is_postgres_url

__all__ = ["OptionArgCommand", "looks_like_log", "looks_like_model", "looks_like_upstream"]


def looks_like_log(value: str) -> bool:
    """A proxy log: an existing file, a SQLite file name, or a ``postgresql://`` URL."""
    return (
        is_postgres_url(value)
        or value.endswith((".db", ".sqlite", ".sqlite3"))
        or Path(value).is_file()
    )


def looks_like_upstream(value: str) -> bool:
    """An upstream: one of the built-in names or an http(s) URL."""
    return value in ("anthropic", "openai", "gemini", "engine") or value.startswith(
        ("http://", "https://")
    )


def looks_like_model(value: str) -> bool:
    """A model: an existing checkpoint folder, config.json or .gguf file."""
    return Path(value).exists() or value.endswith((".gguf", "config.json"))


class OptionArgCommand(click.Command):
    """A command without arguments that says which option a bare argument belongs to.

    Args:
        value_option: the option whose value a bare argument usually is (``--db``).
        looks_like: whether a bare argument looks like that option's value; other bare
            arguments (a value split from its option, ``--since 1 h``) keep click's error.
    """

    def __init__(
        self, *args: Any, value_option: str, looks_like: Callable[[str], bool], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.value_option = value_option
        self.looks_like = looks_like

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.UsageError:
            bare = self._bare_arguments(ctx, given)
            if bare and self.looks_like(bare[0]):
                raise click.UsageError(
                    f"`{ctx.command_path}` takes no bare arguments: give {bare[0]!r} as "
                    f"`{self.value_option} {bare[0]}`",
                    ctx,
                ) from None
            raise

    def _bare_arguments(self, ctx: click.Context, given: list[str]) -> list[str]:
        """The arguments no option takes, or [] when the line does not parse at all."""
        probe = click.Context(self, info_name=ctx.info_name, parent=ctx.parent)
        try:
            _, bare, _ = self.make_parser(probe).parse_args(args=given)
        except click.UsageError:
            return []
        return [str(a) for a in bare]
