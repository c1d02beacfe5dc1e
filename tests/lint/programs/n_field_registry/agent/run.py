import anthropic

from .registry import Registry

client = anthropic.Anthropic()


def turn(registry: Registry, messages: list):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        tools=registry.definitions(),  # PC005: 14
        messages=messages,
    )


def sorted_turn(registry: Registry, messages: list):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=registry.skill_text(),
        tools=registry.sorted_definitions(),
        messages=messages,
    )
