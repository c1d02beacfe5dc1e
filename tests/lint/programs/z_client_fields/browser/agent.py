# Requests with the browser's computer tool (sized by the browser) and with a system prompt
# naming the browser product: nothing to report. A system prompt that tells the client's
# timeout (from the environment) is machine-specific: PC017, info.
import openai

from .session import BrowserSession

client = openai.OpenAI()


def act(session: BrowserSession, goal: str):
    return client.responses.create(
        model="computer-use-preview",
        tools=[session.computer_tool()],
        input=[{"role": "user", "content": goal}],
    )


def act_with_timeout_note(session: BrowserSession, goal: str):
    return client.responses.create(
        model="computer-use-preview",
        instructions=session.timeout_note(),  # PC017: 21
        input=[{"role": "user", "content": goal}],
    )


def act_with_product_note(session: BrowserSession, goal: str):
    return client.responses.create(
        model="computer-use-preview",
        instructions=session.product_note(),
        input=[{"role": "user", "content": goal}],
    )


async def act_on_page(session: BrowserSession, goal: str):
    return client.responses.create(
        model="computer-use-preview",
        instructions=f"You act on the page titled {await session.page_title()}.",
        input=[{"role": "user", "content": goal}],
    )
