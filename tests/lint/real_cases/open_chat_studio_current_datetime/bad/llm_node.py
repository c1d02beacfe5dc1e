"""An LLM pipeline node: system message, history, then the new input."""

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage

from .helpers import get_system_message
from .prompt_context import PromptTemplateContext

model = ChatAnthropic(model="claude-sonnet-4-6")


def run_node(template: str, tz: str, participant: str, history: list, text: str):
    context = PromptTemplateContext(tz, participant)
    system = get_system_message(template, context)
    return model.invoke([system, *history, HumanMessage(content=text)])
