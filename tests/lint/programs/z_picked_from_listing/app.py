import anthropic

from tools import ToolManager

client = anthropic.Anthropic()


def ask(question: str) -> str:
    manager = ToolManager()
    found = manager.get_api_description("Search")
    first = manager.first_description()
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        system="You can call this API:\n" + found,
        messages=[{"role": "user", "content": question}],
    )
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        system="You can call this API:\n" + first,  # PC004: 44
        messages=[{"role": "user", "content": question}],
    )
    return question
