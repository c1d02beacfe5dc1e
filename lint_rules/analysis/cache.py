"""The lint cache: each file's analysis results, keyed by what they depend on.

One JSON file per linted file under ``<cache dir>/lint-<version>/``, named by a hash of the
file's absolute path. It holds the file's content hash, the path as the run named it (the
outputs' locations are relative to the working folder, so a run from another folder misses)
and up to ``KEEP`` outputs, each keyed
by the digest of its inputs: the settings, the summaries of the other modules the file was
analysed with, and the symbols it was asked to export. A file whose content or inputs changed
misses; nothing else is trusted. Writes go through a temporary file and ``os.replace``, so a
run that is killed, or two runs at once, never leave a half-written entry (a corrupt or
unreadable entry is a miss, never an error). The format is JSON, not pickle: a cache folder
restored by CI from elsewhere cannot run code.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._base import Diagnostic, Fix, Location, Related, Severity, TextEdit

#: outputs kept per file: a file is analysed up to 1 + MAX_ROUNDS times in one run, and a warm
#: run must find each of them
KEEP = 8
#: the folder a cache lives in, under the project root unless --cache-dir says otherwise
DEFAULT_DIR = ".promptcache_cache"


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _loc(loc: Location) -> list[Any]:
    return [loc.path, loc.line, loc.col, loc.end_line, loc.end_col]


def diagnostic_to_json(d: Diagnostic) -> dict[str, Any]:
    out: dict[str, Any] = {
        "code": d.code,
        "message": d.message,
        "location": _loc(d.location),
        "severity": int(d.severity),
        "related": [[_loc(r.location), r.message, r.origin, r.value] for r in d.related],
    }
    if d.fix is not None:
        out["fix"] = [d.fix.title, [list(e.__dict__.values()) for e in d.fix.edits]]
    return out


def diagnostic_from_json(data: dict[str, Any]) -> Diagnostic:
    fix = None
    if "fix" in data:
        title, edits = data["fix"]
        fix = Fix(title, tuple(TextEdit(*e) for e in edits))
    return Diagnostic(
        data["code"],
        data["message"],
        Location(*data["location"]),
        Severity(data["severity"]),
        tuple(
            Related(Location(*loc), message, origin, value)
            for loc, message, origin, value in data["related"]
        ),
        fix,
    )


@dataclass
class LintCache:
    """Read and write cached outputs for one run (``folder`` already includes the version)."""

    folder: Path
    writes: int = 0
    hits: int = 0
    _entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    _dirty: set[str] = field(default_factory=set)
    #: ``folder`` as text, and the working folder (read once, on the first relative path):
    #: a warm run names every file's entry
    _folder_text: str = ""
    _cwd: str = ""

    @classmethod
    def open(cls, root: Path, version: str) -> LintCache:
        folder = root / f"lint-{version}"
        return cls(folder)

    def _file(self, path: str) -> str:
        # fsencode: a file name that is not UTF-8 (b"bad\xff.py", read as a lone surrogate)
        # hashes as its bytes rather than failing to encode. A string, not a Path: a warm run
        # opens every file's entry, and pathlib's parsing of each name cost more than the open
        # os.path.abspath, with the working folder read once per run
        if not os.path.isabs(path):
            if not self._cwd:
                self._cwd = os.getcwd()
            path = os.path.join(self._cwd, path)
        if not self._folder_text:
            self._folder_text = os.fspath(self.folder)
        name = digest(os.fsencode(os.path.normpath(path)))
        return os.path.join(self._folder_text, f"{name}.json")

    def _entry(self, path: str, content: str) -> dict[str, Any]:
        entry = self._entries.get(path)
        if entry is None:
            entry = {}
            with contextlib.suppress(OSError, ValueError):
                with open(self._file(path), "rb") as handle:
                    loaded = json.loads(handle.read())
                if isinstance(loaded, dict):
                    entry = loaded
            self._entries[path] = entry
        # the outputs name files as this run shows them (relative to the working folder), so
        # a run from another folder, which names the same file otherwise, must not take them
        if entry.get("content") != content or entry.get("path") != path:
            entry.clear()
            entry["content"] = content
            entry["path"] = path
            entry["outputs"] = {}
        return entry

    def get(self, path: str, content: str, inputs: str) -> dict[str, Any] | None:
        """The cached output of ``path`` (content hash ``content``) for ``inputs``, or None."""
        found: dict[str, Any] | None = self._entry(path, content)["outputs"].get(inputs)
        if found is not None:
            self.hits += 1
        return found

    def put(self, path: str, content: str, inputs: str, output: dict[str, Any]) -> None:
        outputs = self._entry(path, content)["outputs"]
        outputs.pop(inputs, None)
        outputs[inputs] = output
        while len(outputs) > KEEP:
            outputs.pop(next(iter(outputs)))
        self._dirty.add(path)

    def flush(self) -> None:
        """Write the changed entries (atomically); an unwritable folder disables the cache
        for this run without failing it."""
        if not self._dirty:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tag = self.folder.parent / "CACHEDIR.TAG"
            if not tag.exists():
                tag.write_text(
                    "Signature: 8a477f597d28d172789f06886806bc55\n"
                    "# This folder is promptcache lint's cache: safe to delete.\n",
                    encoding="utf-8",
                )
            ignore = self.folder.parent / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# created by promptcache lint\n*\n", encoding="utf-8")
        except OSError:
            return
        for path in sorted(self._dirty):
            data = json.dumps(self._entries[path], separators=(",", ":")).encode()
            try:
                fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, self._file(path))
                self.writes += 1
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                return
        self._dirty.clear()
