"""The ``promptcache`` command line: a click group whose subcommands load on demand.

Each subcommand lives in its own module under ``promptcache/commands/`` and is named in
``COMMANDS`` below. Those modules import only click at the top; heavy libraries (torch, starlette,
libcst) are imported inside the command callbacks, so ``promptcache --help`` stays fast.
"""

from __future__ import annotations

import difflib
import errno
import importlib
import os
import sys

import click

from promptcache import __version__
from promptcache.errors import PromptCacheError

#: subcommand name -> "module:attribute" of its click command. Listed only once it works.
COMMANDS: dict[str, str] = {
    "check": "promptcache.commands.check:check",
    "cost": "promptcache.commands.cost:cost_command",
    "demo": "promptcache.commands.demo:demo",
    "engine": "promptcache.commands.engine:engine_group",
    "hash": "promptcache.commands.hash:hash_command",
    "lint": "promptcache.commands.lint:lint",
    "log": "promptcache.commands.log:log_group",
    "proxy": "promptcache.commands.proxy:proxy",
    "report": "promptcache.commands.report:report_command",
    "rules": "promptcache.commands.rules:rules",
}

#: subcommand -> the extra (``pip install 'promptcache[EXTRA]'``) its libraries come from.
COMMAND_EXTRAS: dict[str, str] = {
    "demo": "all",
    "engine": "engine",
    "proxy": "proxy",
    "report": "proxy",
}

#: Top-level import names of the libraries only the extras install (pyproject.toml's
#: ``[project.optional-dependencies]``, plus markupsafe, which jinja2 needs). A core-only install
#: lacks them; tests/cli/test_missing_extras.py checks this list against pyproject.toml.
EXTRA_MODULES: frozenset[str] = frozenset(
    {
        "aiohttp",
        "anthropic",
        "httptools",
        "httpx2",
        "gguf",
        "huggingface_hub",
        "jinja2",
        "markupsafe",
        "msgspec",
        "numpy",
        "openai",
        "opentelemetry",
        "prometheus_client",
        "psycopg",
        "safetensors",
        "starlette",
        "tokenizers",
        "torch",
        "triton",
        "uvicorn",
        "uvloop",
        "yarl",
        "zmq",
    }
)


#: errnos only a write gives, for want of room (disk full, quota, file too large): one line
_WRITE_ERRNOS = frozenset(
    code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EFBIG) if code is not None
)


def _discard_stdout() -> None:
    """Point standard output at the null device, so the bytes still buffered for it can be
    flushed at exit without a second error."""
    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        return
    os.dup2(null, fd)
    os.close(null)


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when the subcommand is needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS:
            module_name, attr = COMMANDS[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):
                raise TypeError(f"{COMMANDS[cmd_name]} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command names the closest ones, also those of a group
        (``promptcache serve`` -> ``Did you mean 'engine serve'?``): click looks for close
        matches only among the commands a group holds, and this group holds none until one is
        asked for, so it never suggested any."""
        name = args[0] if args else ""
        if (
            name
            and not name.startswith("-")
            and not ctx.resilient_parsing
            and self.get_command(ctx, name) is None
        ):
            # each command by its own name, and a group's by theirs too: serve -> engine serve
            full = {n: n for n in self.list_commands(ctx)}
            for group in list(full):
                command = self.get_command(ctx, group)
                if isinstance(command, click.Group):
                    for sub in command.list_commands(ctx):
                        full.setdefault(sub, f"{group} {sub}")
            close = dict.fromkeys(full[n] for n in difflib.get_close_matches(name, full))
            hint = f" Did you mean {' or '.join(repr(n) for n in close)}?" if close else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        """Turn our own errors into a one-line message and exit status 2, never a traceback;
        Ctrl-C into "interrupted" and 130 (128 + SIGINT, what shells report), not click's
        "Aborted!" and 1."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except PromptCacheError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(2)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").partition(".")[0]
            command = ctx.invoked_subcommand or ""
            if missing not in EXTRA_MODULES or command not in COMMAND_EXTRAS:
                raise  # not an optional library: a real bug, keep its traceback
            extra = COMMAND_EXTRAS[command]
            click.echo(
                f"error: `promptcache {command}` needs {missing}, which this install lacks: "
                f"install promptcache[{extra}] (in a clone of its repository: "
                f"pip install '.[{extra}]')",
                err=True,
            )
            ctx.exit(2)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="promptcache")
def cli() -> None:
    """Make LLM prompt caching work and pay off.

    Lint code for cache breakers, fingerprint prompts, price cache usage, run a logging proxy in
    front of vendor APIs, and serve a local engine with automatic prefix caching.
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``promptcache``).

    A write that fails for want of room (a full disk, a quota, ``> /dev/full``) is one line
    and exit status 2, not a traceback, whichever command (or ``--help``) was writing.
    """
    try:
        cli.main(args=argv if argv is not None else sys.argv[1:], prog_name="promptcache")
    except OSError as exc:
        if exc.errno not in _WRITE_ERRNOS:
            raise
        # Without a file name it was standard output; what is still buffered there would fail
        # again when Python flushes it at exit, so it goes to the null device.
        where = exc.filename
        if where is None:
            where = "the output (standard output)"
            _discard_stdout()
        click.echo(f"error: cannot write {where}: {exc.strerror}", err=True)
        sys.exit(2)
