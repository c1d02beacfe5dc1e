"""Shared SDK fixtures: a realistic layered prompt."""

from __future__ import annotations

import pytest

from promptcache.prompt import PromptBuilder

#: ~1,300 cl100k tokens of coding rules: above the 1024-token minimum of Sonnet 4.5.
RULES = "\n".join(
    f"{i}. Functions in module {i} must have type hints, a docstring and a unit test."
    for i in range(1, 80)
)
SQL_SCHEMA = {
    "type": "object",
    "properties": {
        "sql": {"type": "string", "description": "One SELECT statement."},
        "limit": {"type": "integer", "minimum": 1},
    },
    "required": ["sql"],
}


@pytest.fixture
def builder() -> PromptBuilder:
    """Frozen (system, rules, one tool), session, two history turns and a dynamic question."""
    b = PromptBuilder("claude-sonnet-4-5", cache_key="tenant-42")
    b.tool("run_sql", "Run a read-only SQL query.", SQL_SCHEMA)
    b.system("You are a senior Python reviewer.")
    b.rules(RULES, title="Coding rules")
    b.session("The user is Ada; she maintains the billing service.")
    b.add_user("Is this loop fine?")
    b.add_assistant("Use a comprehension.")
    b.dynamic("Why is SELECT * FROM invoices slow?")
    return b
