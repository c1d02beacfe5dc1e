"""File cannot be read or parsed.

Severity: info
Fix: none

## What it does
Reports a Python file that cannot be read (inside a folder: a symbolic link loop, a link to
nothing, a file without read permission; "cannot read this file: <reason>") or that the standard
`ast` module cannot parse (a syntax error, a null byte, an undecodable encoding; "cannot parse
this file: <reason>"; a file saved as UTF-16 is told to be saved as UTF-8), as one info line.
The linter reports it and goes on with the other files; it never stops with a traceback. A file
whose syntax error is on a line holding `{{` or `{%` is a template of a Python file (cookiecutter,
copier, Jinja: `{{ folder_name }}`): it is skipped, not reported, and the run says how many it
skipped.

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

import codecs
import contextlib
import errno
import os

from .._base import Diagnostic, Location, Severity


def from_error(path: str, exc: Exception) -> Diagnostic:
    """The PC000 diagnostic for ``exc``: an OSError is a file that could not be read; a
    SyntaxError, ValueError or UnicodeDecodeError one that could not be parsed."""
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        if exc.errno == errno.ELOOP:
            reason += " (a symbolic link loop)"
        else:
            with contextlib.suppress(OSError):
                if os.path.islink(path):
                    reason += f" (a symbolic link to {os.readlink(path)!r})"
        return Diagnostic(
            "PC000", f"cannot read this file: {reason}", Location(path, 1, 0, 1, 0), Severity.INFO
        )
    line = getattr(exc, "lineno", None) or 1
    col = max((getattr(exc, "offset", None) or 1) - 1, 0)
    reason = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
    if "null bytes" in reason and _seems_utf16(path):
        reason += " (the file seems to be UTF-16; save it as UTF-8)"
    return Diagnostic(
        "PC000",
        f"cannot parse this file: {reason}",
        Location(path, line, col, line, col),
        Severity.INFO,
    )


def _seems_utf16(path: str) -> bool:
    """Whether the start of the file at ``path`` (its first 512 bytes) is text saved as UTF-16:
    a UTF-16 byte order mark, or the NUL byte of UTF-16 beside most characters on one side
    (even or odd offsets: ASCII text saved as UTF-16 without a mark), and in either case bytes
    that decode as UTF-16 of that byte order into text with no NUL or other control character
    but tab, newline, carriage return and form feed. A binary file (an ELF executable, a
    compiled module) has NUL bytes at both offsets and decodes to U+0000 and other control
    characters, so it is not UTF-16."""
    try:
        with open(path, "rb") as file:
            head = file.read(512)
    except OSError:
        return False
    if head.startswith(b"\xff\xfe"):
        encoding, body = "utf-16-le", head[2:]
    elif head.startswith(b"\xfe\xff"):
        encoding, body = "utf-16-be", head[2:]
    else:
        even, odd = head[0::2], head[1::2]
        if len(odd) < 2:
            return False
        if odd.count(0) * 4 >= len(odd) * 3:
            encoding, body = "utf-16-le", head
        elif even.count(0) * 4 >= len(even) * 3:
            encoding, body = "utf-16-be", head
        else:
            return False
    try:
        # not final: the 512 bytes may end inside a character or a surrogate pair
        text = codecs.getincrementaldecoder(encoding)().decode(body, final=False)
    except UnicodeDecodeError:
        return False
    return all(char >= " " or char in "\t\n\r\x0c" for char in text) and "\x7f" not in text
