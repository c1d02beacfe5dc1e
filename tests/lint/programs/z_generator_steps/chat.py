# The notes of each step go into the system prompt: those of ``research`` hold nothing that
# changes per request; those of ``research_tagged`` hold a uuid, and a step's files hold the
# sandbox's.
import openai

from research import research, research_tagged, research_tools
from steps import Step

client = openai.AsyncOpenAI()


async def answer(query: str):
    notes = []
    async for step in research(query, {}):
        if isinstance(step, Step):
            notes.extend(step.context)
    return await client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "\n".join(notes)}, {"role": "user", "content": query}],
    )


async def answer_tagged(query: str):
    notes = []
    async for step in research_tagged(query):
        if isinstance(step, Step):
            notes.extend(step.context)
    return await client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "\n".join(notes)}, {"role": "user", "content": query}],  # PC002: 48
    )


async def answer_files(query: str):
    notes = []
    async for step in research(query, {}):
        if isinstance(step, Step):
            notes.append(f"{step.query}: {step.files}")
    return await client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "\n".join(notes)}, {"role": "user", "content": query}],  # PC002: 48 PC004: 48
    )


async def answer_tools(query: str):
    notes = []
    async for step in research_tools(query):
        if isinstance(step, Step):
            notes.extend(step.context)
    return await client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "\n".join(notes)}, {"role": "user", "content": query}],
    )


async def answer_tools_files(query: str):
    notes = []
    async for step in research_tools(query):
        if isinstance(step, Step):
            notes.append(f"{step.query}: {step.files}")
    return await client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "\n".join(notes)}, {"role": "user", "content": query}],  # PC002: 48 PC004: 48
    )
