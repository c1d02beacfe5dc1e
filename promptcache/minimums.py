"""The dated table of minimum cacheable prefix lengths per model (``data/model_minimums.toml``).

Vendors cache a prefix only from a model-specific length on; below it a breakpoint silently does
nothing. The numbers change with model releases and doc revisions, so they live in a bundled TOML
file with a source URL and a "checked" date per row, and users can load their own file or
override single models. Sources (checked 2026-11-30):
https://platform.claude.com/docs/en/build-with-claude/prompt-caching ,
https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html ,
https://developers.openai.com/api/docs/guides/prompt-caching ,
https://ai.google.dev/gemini-api/docs/caching .
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from promptcache.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["MinimumRow", "ModelMinimums", "default_model_minimums", "load_model_minimums"]

_REQUIRED = ("name", "vendor", "patterns", "min_tokens", "source_url", "checked")
#: Every key a row may hold: another is a typo (``tool_cachng``) that would be ignored.
_ROW_KEYS = (*_REQUIRED, "note", "tool_caching", "lint_min_tokens")


@dataclass(frozen=True)
class MinimumRow:
    """One model family's minimum cacheable prefix.

    Attributes:
        name: human-readable family name.
        vendor: ``anthropic``, ``bedrock``, ``openai``, ``gemini`` or a user's own label.
        patterns: fnmatch patterns (case-insensitive) matched against model ids.
        min_tokens: minimum cumulative prefix, in tokens, for a cache write or read.
        source_url: where the number was read.
        checked: date (``YYYY-MM-DD``) it was last compared with the source.
        tool_caching: False when the model cannot cache tool definitions (Amazon Nova).
        note: why a value was chosen where sources disagree, or "".
        lint_min_tokens: the linter's (smaller) value where sources disagree, else None: PC008
            reports a prefix as too short only when the vendor would surely not cache it.
    """

    name: str
    vendor: str
    patterns: tuple[str, ...]
    min_tokens: int
    source_url: str
    checked: str
    tool_caching: bool = True
    note: str = ""
    lint_min_tokens: int | None = None

    def describe(self) -> str:
        """``"1024 tokens (Claude Sonnet 4.5; <url>, checked 2026-11-30)"``."""
        return f"{self.min_tokens} tokens ({self.name}; {self.source_url}, checked {self.checked})"


@dataclass(frozen=True)
class ModelMinimums:
    """An ordered table of ``MinimumRow``; the first row whose pattern matches a model wins."""

    rows: tuple[MinimumRow, ...]

    def lookup(self, model: str) -> MinimumRow | None:
        """The row for ``model`` (an Anthropic, Bedrock, OpenAI or Gemini id), or None.

        Raises:
            ConfigError: ``model`` is not a str.
        """
        _check_model(model, "lookup(model)")
        name = model.lower()
        for row in self.rows:
            if any(fnmatch.fnmatchcase(name, pattern.lower()) for pattern in row.patterns):
                return row
        return None

    def with_override(
        self, model: str, min_tokens: int, *, source: str = "user override"
    ) -> ModelMinimums:
        """A copy where ``model`` (exact id) has ``min_tokens``, ahead of every bundled row.

        Raises:
            ConfigError: ``model`` is not a str, or ``min_tokens`` is not a positive int.
        """
        _check_model(model, "with_override(model, ...)")
        _check_min(min_tokens, f"override for {model}")
        existing = self.lookup(model)
        base = existing or MinimumRow(model, "user", (), min_tokens, source, "", True)
        row = replace(base, name=model, patterns=(model,), min_tokens=min_tokens, source_url=source)
        return ModelMinimums((row, *self.rows))


def _check_model(model: object, where: str) -> None:
    if not isinstance(model, str):
        raise ConfigError(f"{where} needs a model name (str), got {type(model).__name__}")


def _check_min(value: Any, where: str, key: str = "min_tokens") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: {key} must be a positive integer, got {value!r}")
    return value


def _parse(data: Mapping[str, Any], origin: str) -> ModelMinimums:
    rows_data = data.get("models")
    if not isinstance(rows_data, list) or not rows_data:
        raise ConfigError(
            f"{origin} has no rows; a row is a [[models]] table with name, vendor, patterns, "
            'min_tokens, source_url and checked, such as name = "Acme 1", vendor = "acme", '
            'patterns = ["acme-1*"], min_tokens = 1024, source_url = "https://...", '
            'checked = "2026-12-01"'
        )
    rows = []
    for i, row in enumerate(rows_data):
        where = f"{origin}: [[models]] #{i + 1}"
        if not isinstance(row, Mapping):
            raise ConfigError(f"{where} must be a table ([[models]]), got {type(row).__name__}")
        unknown = sorted(str(key) for key in row if key not in _ROW_KEYS)
        if unknown:
            raise ConfigError(
                f"{where} has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(_ROW_KEYS)}"
            )
        missing = [key for key in _REQUIRED if key not in row]
        if missing:
            raise ConfigError(f"{where} lacks {', '.join(missing)}")
        patterns = row["patterns"]
        if not isinstance(patterns, Sequence) or isinstance(patterns, str) or not patterns:
            raise ConfigError(f"{where}: patterns must be a non-empty list of strings")
        tool_caching = row.get("tool_caching", True)
        if not isinstance(tool_caching, bool):  # "false" as a string would read as true
            raise ConfigError(
                f"{where}: tool_caching must be true or false (no quotes), got {tool_caching!r}"
            )
        rows.append(
            MinimumRow(
                name=str(row["name"]),
                vendor=str(row["vendor"]),
                patterns=tuple(str(p) for p in patterns),
                min_tokens=_check_min(row["min_tokens"], where),
                source_url=str(row["source_url"]),
                checked=str(row["checked"]),
                tool_caching=tool_caching,
                note=str(row.get("note", "")),
                lint_min_tokens=(
                    _check_min(row["lint_min_tokens"], where, "lint_min_tokens")
                    if "lint_min_tokens" in row
                    else None
                ),
            )
        )
    return ModelMinimums(tuple(rows))


def load_model_minimums(path: str | Path) -> ModelMinimums:
    """Load a table in the bundled file's format (see ``data/model_minimums.toml``).

    Raises:
        ConfigError: the file is missing, is not UTF-8 text, is not TOML or nests it too deeply to
            read, has no ``[[models]]`` row, or a row lacks a key or has a bad value; ``path``
            is not a path.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(
            f"load_model_minimums() needs the path of a TOML file (str or Path), "
            f"got {type(path).__name__}"
        )
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise ConfigError(f"cannot read model minimums file {file}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{file} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None
    except RecursionError:  # tomllib recurses once per level of nested arrays or tables
        raise ConfigError(
            f"{file} nests arrays or inline tables too deeply to read; flatten them"
        ) from None
    return _parse(data, str(file))


@lru_cache(maxsize=1)
def default_model_minimums() -> ModelMinimums:
    """The bundled table (read once per process)."""
    text = resources.files("promptcache").joinpath("data/model_minimums.toml").read_text("utf-8")
    return _parse(tomllib.loads(text), "bundled model_minimums.toml")
