# Async generators that yield status lines and dicts, then one step of known fields: the
# sandbox's file names (a uuid each), the set of files it wrote and the turn's id go into
# other fields than the notes (``research``), or into the notes too (``research_tagged``).
import asyncio
import uuid

from steps import Step


async def run_code(code: str) -> dict:
    path = f"/sandbox/{uuid.uuid4()}.py"
    written = list(set(code.split()))
    return {"path": path, "written": written, "output": code}


async def research(query: str, tracer: dict):
    yield f"Searching for {query}"
    tracer["turn_id"] = str(uuid.uuid4())
    files = await run_code(query)
    yield {"status": "ran the code"}
    yield Step(query=query, context=[f"notes on {query}"], files=files, turn_id=tracer["turn_id"])


async def research_tagged(query: str):
    yield f"Searching for {query}"
    files = await run_code(query)
    yield Step(query=query, context=[f"notes on {query} ({uuid.uuid4()})"], files=files)


async def plan(query: str):
    yield f"Planning {query}"
    yield Step(query=query, context=[f"notes on {query}"], turn_id=str(uuid.uuid4()))


async def research_tools(query: str):
    # the planned steps run their tools together, each paired with its result by zip
    planned = []
    async for step in plan(query):
        if isinstance(step, Step):
            planned.append(step)
        else:
            yield step
    ran = []
    results = await asyncio.gather(*[run_code(s.query) for s in planned])
    pairs = ran + list(zip(planned, results))
    for step, found in pairs:
        step.files = found
        yield step
