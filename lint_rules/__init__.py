"""`promptcache lint`: static analysis of Python code for what silently breaks prompt caching.

Public API::

    from promptcache.lint_rules import RULES, lint_source, lint_paths, LintConfig

    result = lint_source(code, "app.py")
    for d in result.diagnostics:
        print(d.code, d.location.line, d.location.col, d.message)

Positions are 1-based lines and 0-based UTF-8 byte columns (``ast`` conventions); outputs show
1-based character columns. Rules live one per module in ``rules/`` and are documented by their
docstrings; ``promptcache rules`` lists them.
"""

from ._base import (
    Diagnostic,
    Fix,
    FixAvailability,
    Location,
    Related,
    Rule,
    Severity,
    TextEdit,
)
from .config import LintConfig, find_pyproject, load_config
from .registry import RULES, get_rule
from .runner import FileResult, lint_file, lint_paths, lint_source

__all__ = [
    "RULES",
    "Diagnostic",
    "FileResult",
    "Fix",
    "FixAvailability",
    "LintConfig",
    "Location",
    "Related",
    "Rule",
    "Severity",
    "TextEdit",
    "find_pyproject",
    "get_rule",
    "lint_file",
    "lint_paths",
    "lint_source",
    "load_config",
]
