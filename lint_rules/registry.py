"""The rule registry: ``RULES`` built from the modules in ``rules/`` and their docstrings.

A rule module ``rules/pc001_time_in_prefix.py`` defines the code (``PC001``) and the name
(``time-in-prefix``) by its file name and everything else in its docstring::

    \"\"\"Time value in the cached prefix.

    Severity: error
    Fix: none

    ## What it does
    ...
    \"\"\"

followed by ruff's sections (What it does, Why is this bad?, Known problems, Example, Use
instead, Fix safety, Options, References). It exports ``check(ctx) -> Iterable[Diagnostic]``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from types import ModuleType

from promptcache.errors import UnknownRuleError

from . import rules as _rules_pkg
from ._base import Diagnostic, FixAvailability, Rule, Severity
from .context import ModuleContext

Check = Callable[[ModuleContext], Iterable[Diagnostic]]
_MODULE = re.compile(r"^pc(\d{3})_([a-z0-9_]+)$")


def parse_rule(module: ModuleType) -> Rule:
    """Build a ``Rule`` from a rule module's name and docstring; ValueError when malformed."""
    short = module.__name__.rsplit(".", 1)[-1]
    match = _MODULE.match(short)
    if match is None:
        raise ValueError(f"rule module {short!r} must be named pcNNN_<name>")
    doc = (module.__doc__ or "").strip()
    head, _, body = doc.partition("\n## ")
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    if len(lines) < 3:
        raise ValueError(f"{short}: docstring needs a summary, Severity: and Fix: lines")
    meta = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
    sections: dict[str, str] = {}
    for chunk in ("## " + body).split("\n## ")[0:] if body else []:
        title, _, text = chunk.removeprefix("## ").partition("\n")
        sections[title.strip()] = text.strip()
    for needed in ("What it does", "Why is this bad?", "Example"):
        if needed not in sections:
            raise ValueError(f"{short}: docstring lacks the '## {needed}' section")
    return Rule(
        code=f"PC{match.group(1)}",
        name=match.group(2).replace("_", "-"),
        summary=lines[0].rstrip("."),
        severity=Severity.parse(meta["Severity"]),
        fix=FixAvailability(meta["Fix"].strip()),
        sections=sections,
    )


def _load() -> tuple[dict[str, Rule], dict[str, Check]]:
    rules: dict[str, Rule] = {}
    checks: dict[str, Check] = {}
    for info in sorted(pkgutil.iter_modules(_rules_pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{_rules_pkg.__name__}.{info.name}")
        rule = parse_rule(module)
        rules[rule.code] = rule
        check = getattr(module, "check", None)
        if check is not None:
            checks[rule.code] = check
    return rules, checks


RULES, CHECKS = _load()
KNOWN_CODES: frozenset[str] = frozenset(RULES)


def get_rule(code: str) -> Rule:
    """The rule with this code (case-insensitive); ``UnknownRuleError`` names the valid codes."""
    rule = RULES.get(code.strip().upper())
    if rule is None:
        raise UnknownRuleError(f"unknown rule {code!r}; known rules: {', '.join(sorted(RULES))}")
    return rule
