# f) order lost when a list built from a set is iterated again
import anthropic

client = anthropic.Anthropic()
SKILLS = {"search", "summarise", "translate"}


def ask(question: str):
    names = []
    for s in SKILLS:
        names.append(s)
    system = "Skills: " + ", ".join(n.upper() for n in names)  # PC004: 26
    return client.messages.create(
        model="m", max_tokens=10, system=system, messages=[{"role": "user", "content": question}]
    )


def ask_sorted(question: str):
    names = []
    for s in sorted(SKILLS):
        names.append(s)
    system = "Skills: " + ", ".join(n.upper() for n in names)
    return client.messages.create(
        model="m", max_tokens=10, system=system, messages=[{"role": "user", "content": question}]
    )
