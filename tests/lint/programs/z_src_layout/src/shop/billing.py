# billing.clock is lib/billing_code/clock.py, as pyproject's package-dir maps it
from anthropic import Anthropic
from billing.clock import stamp

client = Anthropic()


def invoice(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=512,
        system="Invoice desk, opened " + stamp(),  # PC001: 41
        messages=[{"role": "user", "content": question}],
    )
