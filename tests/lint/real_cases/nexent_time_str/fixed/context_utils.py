"""System prompt sections as prioritised components."""

from dataclasses import dataclass


@dataclass
class SystemPromptComponent:
    content: str
    priority: int


def build_header_component(app_name: str, user_id: str) -> SystemPromptComponent:
    content = f"### Basic Information\nYou are {app_name}, user {user_id}"
    return SystemPromptComponent(content=content, priority=100)


def build_context_components(
    duty: str, app_name: str | None = None, user_id: str = ""
) -> list[SystemPromptComponent]:
    components = [SystemPromptComponent(content=f"### Duty\n{duty}", priority=90)]
    if app_name:
        components.append(build_header_component(app_name, user_id))
    return components


def render_system_prompt(components: list[SystemPromptComponent]) -> str:
    ordered = sorted(components, key=lambda c: -c.priority)
    return "\n\n".join(c.content for c in ordered)
