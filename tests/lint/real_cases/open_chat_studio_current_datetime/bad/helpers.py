"""Render the node's prompt template into the system message."""

from string import Formatter

from langchain_core.messages import SystemMessage

from .prompt_context import PromptTemplateContext


def get_system_message(template: str, context: PromptTemplateContext) -> SystemMessage:
    variables = {field for _, field, _, _ in Formatter().parse(template) if field}
    values = context.get_context(variables)
    return SystemMessage(content=template.format(**values))  # PC001: 33
