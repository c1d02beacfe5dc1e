"""Docs and docstrings speak of the product as it is, not of the work sessions that built it.

A measurement is cited by its benchmark script and its section of docs/benchmarks.md (with the
machine and date), never as "session 12" or "the session's last commit": the history of the work
is in git. Scanned: every file git tracks with a suffix in ``SUFFIXES`` outside ``tests/`` (test
fixtures may hold any text); without git (a source archive) every such file under the
repository root, minus hidden, virtualenv and build folders.

``HISTORY`` matches the wording of work sessions only: "session" or "sessions" followed by a
number ("Session 11", "session 12, an AVX-512 ...", "sessions 8-10"), and "before this change".
It leaves alone what the product itself calls a session: the SDK's session layer
(``breakpoints=("frozen", "session", ...)``), ``--session``, pytest's ``scope="session"``,
conversations ("sessions of 4 turns"), TTLs (``{"session": "1h"}``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".py", ".md", ".c", ".h"}
SKIP_DIRS = {"tests", "build", "dist", "node_modules", "__pycache__"}

HISTORY = re.compile(r"\bsessions?\s+\d+\b(?!\.\d)|\bbefore\s+this\s+change\b", re.IGNORECASE)


def _files() -> list[Path]:
    """The repository's text files to scan (see the module docstring)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return [
            p
            for p in ROOT.rglob("*")
            if p.suffix in SUFFIXES
            and p.is_file()
            and not any(
                part.startswith(".") or part in SKIP_DIRS for part in p.relative_to(ROOT).parts[:-1]
            )
        ]
    names = [n for n in out.split("\0") if n and not n.startswith("tests/")]
    return [ROOT / n for n in names if Path(n).suffix in SUFFIXES and (ROOT / n).is_file()]


def _hits(text: str) -> list[str]:
    """The history wordings in ``text``, in order."""
    return [m.group(0) for m in HISTORY.finditer(text)]


@pytest.mark.parametrize(
    "text",
    [
        "#### Session 11 (2026-12-02): prefill in the fused kernel",
        "the fp32 panels it replaced (session 12, an AVX-512 Zen 4 EPYC)",
        '(docs/benchmarks.md, "Session 9")',
        "Same machine type as sessions 8-10 (AMD EPYC Zen 3)",
        "What changed in session\n2 (each measured)",
        "Numbers were worse before this change.",
    ],
)
def test_history_wording_is_found(text: str) -> None:
    assert _hits(text), text


@pytest.mark.parametrize(
    "text",
    [
        'PromptBuilder(MODEL, breakpoints=("frozen", "session", "history"))',
        'ttl={"session": "1h"}',
        "end of the session layer, shared by this user's or task's requests",
        '@pytest.fixture(scope="session")',
        "100 sessions alternating over the tenants, sessions of 4 turns",
        "builder.session(f'Session opened {datetime.now()}')",
        "session_2 = make_session()  # the --session flag",
        "an HTTP session 3.5 s long",
    ],
)
def test_product_uses_of_session_are_not_flagged(text: str) -> None:
    assert _hits(text) == [], text


def test_no_history_wording_in_tracked_docs_and_code() -> None:
    files = _files()
    assert any(f.name == "README.md" for f in files), "the scan found no README.md"
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for m in HISTORY.finditer(text):  # the whole text: a wording may wrap across lines
            lineno = text.count("\n", 0, m.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{lineno}: {m.group(0)!r}")
    assert found == [], (
        "cite measurements by benchmark script and docs/benchmarks.md section, not by the work "
        "session that ran them:\n" + "\n".join(found)
    )
