"""``[tool.promptcache.lint]`` in pyproject.toml, validated into a ``LintConfig``.

Keys (all optional)::

    [tool.promptcache.lint]
    select = ["ALL"]                 # rule codes to run ("ALL" = every rule)
    ignore = ["PC017"]               # rule codes to skip
    exclude = ["tests/fixtures"]     # gitignore-style patterns, relative to the config file
    respect-gitignore = true         # skip what .gitignore files ignore
    default-vendor = "anthropic"     # breakpoint semantics for user sinks: anthropic, bedrock,
                                     # openai, gemini
    [tool.promptcache.lint.per-file-ignores]
    "scripts/*.py" = ["PC001"]
    [tool.promptcache.lint.model-minimums]   # minimum cacheable prefix, tokens
    "claude-sonnet-4-6" = 2048
    [[tool.promptcache.lint.sinks]]          # your own LLM wrappers
    call = "myapp.llm.ask"                   # or "*.ask" for a method chain
    system = "system_prompt"                 # keyword name or argument index
    messages = "history"

A bad key, value or rule code raises ``ConfigError`` (or ``UnknownRuleError``) naming it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from promptcache.errors import ConfigError, UnknownRuleError

from .sinks import SinkSpec, spec_from_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

VENDORS = ("anthropic", "bedrock", "openai", "gemini")
_KEYS = {
    "select",
    "ignore",
    "exclude",
    "per-file-ignores",
    "respect-gitignore",
    "default-vendor",
    "model-minimums",
    "sinks",
}


@dataclass(frozen=True)
class LintConfig:
    """Validated linter settings (see the module docstring for the TOML form).

    ``root`` is the folder of the pyproject.toml the settings came from (paths in ``exclude``
    and ``per_file_ignores`` are relative to it); ``model_minimums`` are in tokens.
    """

    root: Path = field(default_factory=Path.cwd)
    select: frozenset[str] = frozenset()
    ignore: frozenset[str] = frozenset()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    respect_gitignore: bool = True
    default_vendor: str = "anthropic"
    model_minimums: tuple[tuple[str, int], ...] = ()
    sinks: tuple[SinkSpec, ...] = ()

    def enabled(self, codes: frozenset[str]) -> frozenset[str]:
        """The rule codes to run out of ``codes`` (every known code)."""
        chosen = codes if not self.select or "ALL" in self.select else self.select & codes
        return chosen - self.ignore


def _read_toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    except RecursionError:  # tomllib recurses once per level of nested arrays or tables
        raise ConfigError(
            f"{path} nests arrays or inline tables too deeply to read; flatten them"
        ) from None


def _kind(value: object) -> str:
    """How TOML spells the type of ``value``, for error messages."""
    if isinstance(value, list):
        return "an array of tables" if value and isinstance(value[0], dict) else "an array"
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}
    return names.get(type(value), f"a {type(value).__name__}")


def lint_table(data: dict[str, object], path: Path) -> dict[str, object] | None:
    """``[tool.promptcache.lint]`` out of a parsed pyproject.toml; None when it is absent.

    Raises ``ConfigError`` naming the file and the key when ``tool``, ``tool.promptcache`` or
    ``tool.promptcache.lint`` is there but is not a table (then we cannot tell what it holds).
    """
    table = data
    key = ""
    for part in ("tool", "promptcache", "lint"):
        if part not in table:
            return None
        value = table[part]
        key = f"{key}.{part}" if key else part
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {key} must be a table ([{key}]), not {_kind(value)}")
        table = value
    return table


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` that has a [tool.promptcache.lint].

    Raises ``ConfigError`` for a pyproject.toml on the way that is not valid TOML, or whose
    ``tool``, ``tool.promptcache`` or ``tool.promptcache.lint`` is not a table.
    """
    start = start.resolve()
    for folder in [start, *start.parents] if start.is_dir() else list(start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and lint_table(_read_toml(candidate), candidate) is not None:
            return candidate
    return None


def load_config(path: Path | None, known_codes: frozenset[str], named: bool = False) -> LintConfig:
    """Read ``path`` (a pyproject.toml) or return defaults when None.

    Raises ``ConfigError`` for unreadable TOML or bad values and ``UnknownRuleError`` for a rule
    code that does not exist. ``named``: the user named the file (``--config``), so a file
    without a ``[tool.promptcache.lint]`` table is an error too, not a silent run on defaults.
    """
    if path is None:
        return LintConfig()
    table = lint_table(_read_toml(path), path)
    if table is None and named:
        raise ConfigError(
            f"{path} has no [tool.promptcache.lint] table, so it sets nothing; put the settings "
            'under it (e.g. [tool.promptcache.lint] then select = ["PC001"]), or leave --config '
            "out to use the nearest pyproject.toml that has one"
        )
    return parse_table(table or {}, path.parent, known_codes, str(path))


def _pattern(pattern: str, key: str, where: str) -> str:
    """``pattern`` if pathspec compiles it as a gitignore pattern, else ``ConfigError``; so is a
    pattern wrapped in quotes (``"'gen/*'"``, as copied from a shell): gitignore syntax reads the
    quotes as part of the name, so it would match nothing."""
    if len(pattern) >= 2 and pattern[0] == pattern[-1] and pattern[0] in "'\"":
        raise ConfigError(
            f"{where}: bad pattern {pattern!r} in {key}: it is wrapped in quotes, which gitignore "
            f"syntax reads as part of the name, so it matches nothing; write {pattern[1:-1]!r}"
        )
    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except (re.error, ValueError) as exc:
        why = exc.msg if isinstance(exc, re.error) else "not a valid gitignore pattern"
        raise ConfigError(
            f"{where}: bad pattern {pattern!r} in {key}: {why} "
            '(patterns use gitignore syntax, e.g. "build/" or "scripts/*.py")'
        ) from exc
    return pattern


def _codes(value: object, key: str, where: str, known: frozenset[str]) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f'{where}: {key} must be a list of rule codes, e.g. ["PC001"]')
    codes = frozenset(v.strip().upper() for v in value)
    unknown = sorted(codes - known - {"ALL"})
    if unknown:
        raise UnknownRuleError(
            f"{where}: unknown rule code(s) {', '.join(unknown)} in {key}; "
            "run `promptcache rules` for the list"
        )
    # "ALL" is every rule wherever codes are listed (as ruff's): ignore = ["ALL"] ignores them all
    return known if "ALL" in codes else codes


def parse_table(
    table: dict[str, object], root: Path, known: frozenset[str], where: str = "config"
) -> LintConfig:
    """Validate a ``[tool.promptcache.lint]`` table (already parsed TOML)."""
    unknown_keys = sorted(set(table) - _KEYS)
    if unknown_keys:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown_keys)} in [tool.promptcache.lint]; "
            f"allowed: {', '.join(sorted(_KEYS))}"
        )
    select = _codes(table.get("select", []), "select", where, known)
    if "select" in table and not select:  # as --select "": no code is a mistake, not every rule
        raise ConfigError(
            f'{where}: select = [] names no rule; list codes (select = ["PC001"]), use ["ALL"], '
            "or leave select out to run every rule"
        )
    ignore = _codes(table.get("ignore", []), "ignore", where, known)
    exclude = table.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(v, str) for v in exclude):
        raise ConfigError(f'{where}: exclude must be a list of path patterns, e.g. ["build/"]')
    for pattern in exclude:
        _pattern(pattern, "exclude", where)
    per_file_raw = table.get("per-file-ignores", {})
    if not isinstance(per_file_raw, dict):
        raise ConfigError(f"{where}: per-file-ignores must be a table of pattern = [codes]")
    per_file = tuple(
        (
            _pattern(pattern, "per-file-ignores", where),
            _codes(codes, f"per-file-ignores[{pattern!r}]", where, known),
        )
        for pattern, codes in per_file_raw.items()
    )
    gitignore = table.get("respect-gitignore", True)
    if not isinstance(gitignore, bool):
        raise ConfigError(f"{where}: respect-gitignore must be true or false")
    vendor = table.get("default-vendor", "anthropic")
    if vendor not in VENDORS:
        raise ConfigError(f"{where}: default-vendor must be one of {', '.join(VENDORS)}")
    minimums_raw = table.get("model-minimums", {})
    if not isinstance(minimums_raw, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in minimums_raw.values()
    ):
        raise ConfigError(
            f'{where}: model-minimums must map model ids to token counts, e.g. "claude-x" = 1024'
        )
    sinks_raw = table.get("sinks", [])
    if not isinstance(sinks_raw, list) or not all(isinstance(s, dict) for s in sinks_raw):
        raise ConfigError(f"{where}: sinks must be an array of tables ([[...sinks]])")
    try:
        sinks = tuple(spec_from_config(entry) for entry in sinks_raw)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    for entry, sink in zip(sinks_raw, sinks, strict=True):
        if not sink.regions and not sink.positional:  # it would check nothing, silently
            raise ConfigError(
                f"{where}: sinks entry {entry['call']!r} names no argument to check; add system, "
                "tools, messages or text (a keyword name or an argument index), e.g. system = "
                '"system_prompt"'
            )
    return LintConfig(
        root=root,
        select=select,
        ignore=ignore,
        exclude=tuple(exclude),
        per_file_ignores=per_file,
        respect_gitignore=gitignore,
        default_vendor=str(vendor),
        model_minimums=tuple((str(k), int(v)) for k, v in minimums_raw.items()),
        sinks=tuple(
            SinkSpec(
                f"custom.{vendor}",
                s.label,
                s.suffixes,
                s.qualnames,
                s.guard,
                s.regions,
                s.positional,
                s.params,
                s.messages_kw,
                s.root_ok,
            )
            for s in sinks
        ),
    )
