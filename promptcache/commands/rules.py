"""``promptcache rules``: list the lint rules, or explain one."""

from __future__ import annotations

import json

import click


@click.command(name="rules")
@click.argument("code", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def rules(code: str | None, as_json: bool) -> None:
    """List the `promptcache lint` rules, or explain one rule.

    The explanation says what the rule finds, why it breaks caching (with the vendor rule and
    its source), and shows a bad and a good example.

    \b
    Example:
        promptcache rules
        promptcache rules PC001
    """
    from promptcache.lint_rules.registry import RULES, get_rule

    if code is None:
        if as_json:
            payload = [
                {
                    "code": r.code,
                    "name": r.name,
                    "severity": str(r.severity),
                    "fix": r.fix.value,
                    "summary": r.summary,
                }
                for r in RULES.values()
            ]
            click.echo(json.dumps(payload, indent=2))
            return
        width = max(len(r.name) for r in RULES.values())
        for r in RULES.values():
            fix = "fix" if r.fix.value != "none" else "   "
            click.echo(f"{r.code}  {r.name:<{width}}  {r.severity!s:<7}  {fix}  {r.summary}")
        return
    rule = get_rule(code)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "code": rule.code,
                    "name": rule.name,
                    "severity": str(rule.severity),
                    "fix": rule.fix.value,
                    "summary": rule.summary,
                    "sections": rule.sections,
                },
                indent=2,
            )
        )
        return
    click.echo(f"{rule.code} {rule.name}: {rule.summary}")
    click.echo(f"Severity: {rule.severity}. Autofix: {rule.fix.value}.\n")
    for title, text in rule.sections.items():
        click.echo(f"## {title}\n{text}\n")
