"""File cannot be parsed.

Severity: info
Fix: none

## What it does
Reports a Python file that the standard `ast` module cannot parse (a syntax error, a null byte,
an undecodable encoding), as one info line. The linter reports it and goes on with the other
files; it never stops with a traceback. A file whose syntax error is on a line holding `{{` or
`{%` is a template of a Python file (cookiecutter, copier, Jinja: `{{ folder_name }}`): it is
skipped, not reported, and the run says how many it skipped.

## Why is this bad?
Nothing in the file can be checked, so a cache breaker in it would go unnoticed.

## Example
```python
def ask(:
    ...
```

## Use instead
```python
def ask():
    ...
```

## References
- https://docs.python.org/3/library/ast.html#ast.parse
"""

from __future__ import annotations

from .._base import Diagnostic, Location, Severity


def from_error(path: str, exc: Exception) -> Diagnostic:
    """The PC000 diagnostic for ``exc`` (SyntaxError, ValueError or UnicodeDecodeError)."""
    line = getattr(exc, "lineno", None) or 1
    col = max((getattr(exc, "offset", None) or 1) - 1, 0)
    reason = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
    return Diagnostic(
        "PC000",
        f"cannot parse this file: {reason}",
        Location(path, line, col, line, col),
        Severity.INFO,
    )
