"""HelpDesk, fixed: the twin of ``examples/lint_app/support_bot.py`` that caches.

The system prompt is built once at import from stable parts (policy, sorted product list) and
carries the only breakpoint, with a 1-hour TTL. The time, the request id and the customer
profile (as sorted JSON) ride in the newest user message and in ``metadata``, after the cached
prefix. ``promptcache lint examples/lint_app_fixed`` reports nothing.
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
SYSTEM_PROMPT = f"We support: {', '.join(sorted(PRODUCTS))}\n{POLICY}"
LOOKUP_TOOL = {
    "name": "lookup_order",
    "description": "Look up an order by its id.",
    "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
}


def answer(customer: dict[str, str], question: str) -> str:
    now = datetime.now().strftime("%Y-%m-%d %H:%M")
    request_id = uuid.uuid4().hex
    profile = {field: customer[field] for field in customer.keys() & {"name", "plan", "city"}}
    context = f"Current time: {now}\nCustomer: {json.dumps(profile, sort_keys=True)}"
    reply = client.messages.create(
        model=MODEL,
        max_tokens=512,
        tools=[LOOKUP_TOOL],
        system=[
            {
                "type": "text",
                "text": SYSTEM_PROMPT,
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            }
        ],
        messages=[{"role": "user", "content": f"{context}\n\n{question}"}],
        metadata={"user_id": request_id},
    )
    return "".join(block.text for block in reply.content if block.type == "text")
