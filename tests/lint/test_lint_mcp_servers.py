"""PC005 on MCP tool lists: one server's own list is an unproven flow, shown by ``--explain``
at each of its lines of ``fixtures/PC005_servers.py`` with the reason; several servers' lists
joined are findings (the fixture's markers, checked by ``test_lint_fixtures``)."""

from __future__ import annotations

from click.testing import CliRunner
from lint_markers import FIXTURES, expected_markers, lint_fixture

from promptcache.cli import cli

FIXTURE = FIXTURES / "PC005_servers.py"
#: the ``tools=`` lines of the functions that send one server's list
ONE_SERVER_LINES = {84, 89, 94, 107, 115, 127, 132}


def test_one_server_lists_are_unproven_flows_and_joined_lists_findings() -> None:
    source, result = lint_fixture(FIXTURE)
    notes = {d.location.line for d in result.notes if d.code == "PC005"}
    assert notes == ONE_SERVER_LINES
    assert not notes & {line for line, _, _ in expected_markers(source)}
    for note in result.notes:
        (reason,) = [r.message for r in note.related if r.message.startswith("not shown")]
        assert reason == (
            "not shown to change: the tools of one MCP server, in the order it registers "
            "them; no other server's list is joined to it here"
        )
    lines = source.splitlines()
    for line in ONE_SERVER_LINES:
        assert "tools=" in lines[line - 1], line


def test_explain_prints_each_one_server_list() -> None:
    result = CliRunner().invoke(
        cli, ["lint", "--no-cache", "--explain", "--select", "PC005", str(FIXTURE)]
    )
    assert result.exit_code == 1, result.output
    heading = (
        "explain: 7 unproven flows (not findings: the chain passes through a call the analysis "
        "cannot see, or a place it names does not show that step, or what it carries is not "
        "shown to change):"
    )
    assert heading in result.stderr
    explained = [
        int(line.split(":")[1])
        for line in result.stderr.splitlines()
        if line.startswith("  ") and " PC005 " in line
    ]
    assert sorted(explained) == sorted(ONE_SERVER_LINES)
    assert "Found 8 findings in 1 file" in result.stdout
