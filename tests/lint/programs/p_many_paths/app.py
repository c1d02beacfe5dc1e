# The same origin (`time.strftime` in clock.stamp) reaches the system prompt through four
# helpers, one of them a call the analysis cannot see: one finding, whose chain is the shortest
# proven path (through `morning`, the earlier of the two shortest).
import anthropic
from clock import evening, late_evening, morning, wrapped

client = anthropic.Anthropic()


def system_prompt() -> str:
    return "\n".join([wrapped(), late_evening(), evening(), morning()])


def ask(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=system_prompt(),  # PC001: 15
        messages=[{"role": "user", "content": question}],
    )
