# Agents reached through a field of what a function is given: an agent stored in a variant of
# a list, read by a runner as `variant.agent`, or under a dict's "agent" key. A method of the
# agent reads one field of it (its builder, its persona): the service's model name, from the
# environment, is in another field and is not sent (silent); a persona from the environment
# in the field it reads is (found).
import os
from dataclasses import dataclass
from typing import Any

from shop.agent import Agent
from shop.service import ChatService, DraftService

PERSONA = os.getenv("SHOP_PERSONA", "a shop assistant")
TONE = os.getenv("SHOP_TONE", "a friendly clerk")


@dataclass
class Variant:
    name: str
    agent: Any


class Runner:
    async def compare(self, variants, ask_as=False):
        return [await self._run_variant(v, ask_as) for v in variants]

    async def _run_variant(self, variant, ask_as):
        return await self._run(variant.agent, ask_as)

    async def _run(self, agent: "Agent", ask_as):
        if ask_as:
            return await agent.ask_as("Which shoes fit me?")
        return await agent.ask("Which shoes fit me?")


async def ask_held(holder, ask_as=False):
    agent: Agent = holder["agent"]
    if ask_as:
        return await agent.ask_as("Where is my order?")
    return await agent.ask("Where is my order?")


async def main(builder):
    variants = [Variant(name="default", agent=Agent(ChatService(), builder))]
    await Runner().compare(variants)
    await ask_held({"agent": Agent(DraftService(), builder)})
    personas = [Variant(name="persona", agent=Agent(ChatService(), builder, persona=PERSONA))]
    await Runner().compare(personas, ask_as=True)  # PC017: 27
    held = {"agent": Agent(DraftService(), builder, persona=TONE)}
    await ask_held(held, ask_as=True)  # PC017: 19
