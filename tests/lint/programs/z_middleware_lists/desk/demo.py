# The memory middleware's notes folder (from the environment, or made for the run) is only
# where it keeps its notes: its prompt line is a constant (silent). The persona agent's
# middleware reads its persona from the environment: found in the agent's module.
from desk.agent import Agent, PersonaAgent
from desk.memory import NOTES_DIR, MemoryMiddleware


async def main():
    mw = MemoryMiddleware(notes_dir=NOTES_DIR)
    agent = Agent(middlewares=[mw])
    return await agent.ask("hello")


async def main_persona():
    agent = PersonaAgent()
    return await agent.ask("hello")
