# Values in the run's input (the newest user turn) are outside the cached prefix; values in
# the agent's instructions are inside it.
from datetime import datetime

from sdk import Agent, Runner

planner = Agent(name="planner", instructions="Plan the searches.")


async def research(query: str, results: list[str]):
    text = "\n".join(sorted(results))
    await Runner.run(planner, f"Query: {query}\nAt {datetime.now().isoformat()}\n{text}")


async def stamped(query: str):
    agent = Agent(name="dated", instructions=f"Today is {datetime.now().isoformat()}")
    await Runner.run(agent, query)  # PC001: 21


async def stamped_by_position(query: str):
    agent = Agent("dated", f"Now: {datetime.now():%H:%M}")
    await Runner.run(agent, query)  # PC001: 21
