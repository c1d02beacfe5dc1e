# A folder chosen once when an agent is built, named in a subagent's system prompt: the agent
# and its prompt serve every request it is given, so the id is the session's. Chosen in the
# function that sends the request, or in one that builds an agent and runs it at once, it is
# new for every request.
import uuid
from datetime import datetime
from pathlib import Path

from agentkit import create_agent
from openai import OpenAI

client = OpenAI()


def subagent_spec(name: str, workdir: Path) -> dict:
    return {"name": name, "system_prompt": f"Save your notes under {workdir}."}


def create_research_agent(model: str):
    workdir = Path("/tmp") / uuid.uuid4().hex
    researcher = subagent_spec("researcher", workdir)
    writer = create_agent(model, system_prompt=f"Read the notes in {workdir}.")
    return create_agent(model, system_prompt="Lead the team.", subagents=[researcher, writer])


def create_dated_agent(model: str):
    # the look-alike: a time told in a factory's prompt is meant to be current (per request)
    now = datetime.now().strftime("%H:%M")
    return create_agent(model, system_prompt=f"It is {now}.")  # PC001: 54


class Team:
    def connect(self, model: str) -> None:
        folder = Path("/tmp") / uuid.uuid4().hex
        self.agent = create_agent(model, system_prompt=f"Work in {folder}.")


def answer(question: str):
    workdir = Path("/tmp") / uuid.uuid4().hex  # PC002: 14
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": f"Save your notes under {workdir}."},
            {"role": "user", "content": question},
        ],
    )


async def answer_with_agent(question: str):
    workdir = Path("/tmp") / uuid.uuid4().hex  # PC002: 14
    agent = create_agent("gpt-4o", system_prompt=f"Work in {workdir}.")
    return await agent.run(question)


def answer_with_subagent(question: str):
    spec = subagent_spec("researcher", Path("/tmp") / uuid.uuid4().hex)
    return run_spec(spec, question)  # PC002: 20


def run_spec(spec: dict, question: str):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": spec["system_prompt"]},
            {"role": "user", "content": question},
        ],
    )


def build_pair(model: str, folder: str):
    agent = create_agent(model, system_prompt=f"Keep your files in {folder}.")
    return agent, folder


def make_graph(model: str):
    # a factory that unpacks the agent from a pair and returns it: the folder is the graph's
    folder = f"harbor-{uuid.uuid4()}"
    graph, _folder = build_pair(model, folder)
    return graph


async def answer_with_pair(question: str):
    # the look-alike: the pair is built and its agent run at once, for this request
    graph, _folder = build_pair("gpt-4o", f"harbor-{uuid.uuid4()}")  # PC002: 52
    return await graph.run(question)
