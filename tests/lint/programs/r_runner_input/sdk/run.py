from dataclasses import dataclass

import openai

from .agent import Agent


@dataclass
class ModelInput:
    input: list
    instructions: str


class Model:
    def __init__(self) -> None:
        self.client = openai.AsyncOpenAI()

    async def get_response(self, request: ModelInput, tools: list):
        return await self.client.responses.create(
            model="gpt-5",
            instructions=request.instructions,
            input=request.input,
            tools=tools,
        )


def to_items(input: str) -> list:
    return [{"role": "user", "content": input}]


class Runner:
    @classmethod
    async def run(cls, agent: Agent, input: str):
        # a dataclass given by position and one given by keyword: each field holds its own
        request = ModelInput(to_items(input), agent.get_system_prompt())
        first = await Model().get_response(request, agent.tools)
        again = ModelInput(input=to_items(input), instructions=agent.get_system_prompt())
        return first, await Model().get_response(again, agent.tools)
