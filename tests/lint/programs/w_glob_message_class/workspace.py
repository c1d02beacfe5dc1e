"""Project files listed into system messages built with a positional role (another module's
class): glob matches in filesystem order are flagged; sorted matches and a user message are not."""

from __future__ import annotations

from pathlib import Path

from .message import Message


def listed(workspace: Path, patterns: list[str]) -> Message:
    files: list[Path] = []
    for pattern in patterns:
        for path in workspace.glob(pattern):
            files.append(path)
    listing = "\n".join(f"- {path}" for path in files)
    return Message("system", f"Files:\n{listing}")  # PC004: 40


def listed_sorted(workspace: Path, patterns: list[str]) -> Message:
    files: list[Path] = []
    for pattern in patterns:
        for path in sorted(workspace.glob(pattern)):
            files.append(path)
    listing = "\n".join(f"- {path}" for path in files)
    return Message("system", f"Files:\n{listing}")


def listed_for_user(workspace: Path, pattern: str) -> Message:
    listing = "\n".join(str(path) for path in workspace.glob(pattern))
    return Message("user", f"Files:\n{listing}")
