"""bad.py's breakers and fixed.py's look-alikes in one program (one pair of runs checks both):
`python both.py`. Only bad.py's call sites may be reported."""

import anthropic
import bad
import fixed
import openai

if __name__ == "__main__":
    claude, gpt = anthropic.Anthropic(), openai.OpenAI()
    clients = {"anthropic": claude, "openai": gpt}
    for vendor, case in bad.CASES.values():
        case(clients[vendor])
    fixed.clock(claude)
    fixed.tools_set(gpt)
    fixed.skills(gpt)
    fixed.cache_key(gpt)
    fixed.few_shot(gpt)
    fixed.breakpoints(claude)
    fixed.conversation(claude)
