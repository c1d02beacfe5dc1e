"""An LLM pipeline node: system message, history, then the new input."""

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage

from .helpers import get_system_message
from .prompt_context import PromptTemplateContext

model = ChatAnthropic(model="claude-sonnet-4-6")


def run_node(template: str, tz: str, participant: str, history: list, text: str):
    context = PromptTemplateContext(tz, participant)
    system = get_system_message(template, context)
    # the precise time goes on the newest turn, after the cached prefix
    stamp = f"<current_datetime>{context.get_current_datetime()}</current_datetime>"
    return model.invoke([system, *history, HumanMessage(content=f"{stamp}\n{text}")])
