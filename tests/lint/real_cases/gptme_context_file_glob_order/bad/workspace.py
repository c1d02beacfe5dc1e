"""The workspace part of the system prompt: the project files named by the config's globs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .message import Message

DEFAULT_CONTEXT_FILES = ["README*", "pyproject.toml", "docs/*.md"]


def prompt_workspace(workspace: Path, patterns: list[str] | None = None) -> Iterator[Message]:
    context_files: list[Path] = []
    seen: set[Path] = set()
    for fileglob in patterns or DEFAULT_CONTEXT_FILES:
        for f in workspace.glob(fileglob):
            resolved = f.resolve()
            if resolved not in seen:
                context_files.append(f)
                seen.add(resolved)
    if context_files:
        listing = "\n".join(f"- {f}" for f in context_files)
        yield Message("system", f"## Selected files\n\nRead with `cat`:\n{listing}")  # PC004: 74
