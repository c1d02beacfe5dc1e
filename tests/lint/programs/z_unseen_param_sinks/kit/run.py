# An agent runner look-alike: each turn stores the run's input into the run context, asks the
# agent (untyped: its method is code the linter cannot see) for its instructions given that
# context, and sends them; the input itself goes in the newest user turn.
import openai


class RunContext:
    def __init__(self) -> None:
        self.turn_input: list = []


async def get_response(instructions: str, items: list):
    client = openai.AsyncOpenAI()
    return await client.responses.create(model="gpt-5", instructions=instructions, input=items)


def with_note(instructions: str, note: str) -> str:
    return f"{instructions}\n\nNote: {note}"


async def run_turn(agent, items: list, context, note: str = ""):
    instructions = await agent.get_instructions(context)
    return await get_response(with_note(instructions, note), items)


class Runner:
    @classmethod
    async def run(cls, agent, input: str, note: str = ""):
        context = RunContext()
        items = [{"role": "user", "content": input}]
        context.turn_input = list(items)
        return await run_turn(agent, items, context, note)
