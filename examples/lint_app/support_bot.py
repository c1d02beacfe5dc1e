"""HelpDesk, written the naive way: a support bot whose prompt breaks caching in every way.

Each request sends a long policy text as the system prompt. This version starts that prompt
with the current time and a request id, serialises the customer profile (its fields picked
from a set, so in a set's order) without sorted keys, lists the products from a set, and marks
cache breakpoints in an order the API rejects.
``promptcache lint examples/lint_app`` reports each; ``examples/lint_app_fixed`` is the twin
that passes. Not run by the tests: they lint it.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime

import anthropic

client = anthropic.Anthropic()
MODEL = "claude-sonnet-4-5"
PRODUCTS = {"laptop", "phone", "tablet", "watch"}
POLICY = "\n".join(
    f"{number}. Follow refund rule {number} exactly as written in the handbook."
    for number in range(1, 80)
)
LOOKUP_TOOL = {
    "name": "lookup_order",
    "description": "Look up an order by its id.",
    "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    "cache_control": {"type": "ephemeral"},
}


def build_system_prompt(customer: dict[str, str]) -> str:
    """Build the system prompt for one support request."""
    now = datetime.now().strftime("%Y-%m-%d %H:%M")
    request_id = uuid.uuid4().hex
    profile = {field: customer[field] for field in customer.keys() & {"name", "plan", "city"}}
    return (
        f"Current time: {now}. Request id: {request_id}.\n"
        f"Customer: {json.dumps(profile)}\n"
        f"We support: {', '.join(PRODUCTS)}\n"
        f"{POLICY}"
    )


def answer(customer: dict[str, str], question: str) -> str:
    reply = client.messages.create(
        model=MODEL,
        max_tokens=512,
        tools=[LOOKUP_TOOL],
        system=[
            {
                "type": "text",
                "text": build_system_prompt(customer),
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            }
        ],
        messages=[{"role": "user", "content": question}],
    )
    return "".join(block.text for block in reply.content if block.type == "text")
