"""Every `--since` / `--until` value the docs write is one `promptcache report` accepts.

A reader copies them from the Markdown; one the option refuses (a bare ``09:17``) is a usage
error on their first try. The values are read from the real docs files and converted by the
option's own type.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from promptcache.commands.report import TimeBound

ROOT = Path(__file__).resolve().parents[2]
# an option and its value inside a code span or block, up to a space, backtick, pipe or bracket
_BOUND = re.compile(r"--(since|until)[ =]([^\s`|)\]]+)")


def test_every_since_and_until_in_the_docs_parses() -> None:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for option, value in _BOUND.findall(line):
                if value in ("TIME", "yesterday"):  # the placeholder; the documented bad value
                    continue
                found.append((f"{path.name}:{number}", option, value))
    assert len(found) > 10, found
    bad = []
    for where, option, value in found:
        try:
            TimeBound(now=1_764_493_200.0).convert(value, None, None)
        except click.BadParameter as error:
            bad.append(f"{where}: --{option} {value}: {error.message}")
    assert bad == []
