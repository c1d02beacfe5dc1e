"""The tests of a file path the user names for a command to write, shared so that each
command says the same thing in the same words: whether the file's folder can hold it
(``lint -o``, ``report -o``, ``check -o``, ``proxy --db``, the request log's ``log copy DST``,
a file above ``demo --output-dir``), and whether a report's name is a Python source file's
(``lint -o``, ``check -o``, ``--promptcache-check-output``).

Only the standard library is imported here (the CLI's ``--help`` stays fast).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final

__all__ = ["PYTHON_NAME", "folder_problem", "is_python_source"]

#: Why a report is refused a Python source file's name (see :func:`is_python_source`).
PYTHON_NAME: Final = (
    "a report is not Python source; a .py, .pyi or .pyw name would replace a source file or be "
    "read as one: pick another name"
)


def folder_problem(file: str | Path) -> str | None:
    """Why the folder of ``file`` cannot hold it, or None when that folder exists.

    The answer is one of:

    - ``folder X does not exist`` (X the folder as given, relative if ``file`` is; a dangling
      symbolic link adds `` (a symbolic link to 'T')``);
    - ``X is not a folder``: X is the folder, or the first folder above it, that is a file
      (or anything else but a folder), so ``a_file/sub/out.json`` names ``a_file``;
    - the system's words for any other failure to look the folder up, such as
      ``Too many levels of symbolic links`` or ``Permission denied``.

    Nothing is created; whether the folder lets a file be written is left to the caller.
    """
    folder = Path(file).parent
    try:
        mode = os.stat(folder).st_mode
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:  # a file on the way: name it, not the folder under it
            for above in folder.parents:
                if above.exists() and not above.is_dir():
                    return f"{above} is not a folder"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            link = f" (a symbolic link to {os.readlink(folder)!r})" if folder.is_symlink() else ""
            return f"folder {folder} does not exist{link}"
        return exc.strerror or str(exc)
    return None if stat.S_ISDIR(mode) else f"{folder} is not a folder"


def is_python_source(output: str | Path) -> bool:
    """Whether the report file ``output`` has a Python source file's name (``.py``, ``.pyi``
    or ``.pyw``, any case), existing or not: an existing one may be source the command need
    not name to run (a test file of a folder that pytest collects, a module of ``python -m
    pkg``), which the report would replace; a new one would be collected and linted as code."""
    return Path(output).suffix.lower() in {".py", ".pyi", ".pyw"}
