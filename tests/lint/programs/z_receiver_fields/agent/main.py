import uuid

from agent.fallback import FallbackHandler
from agent.runner import run_with_retry


def chat(agent, prompt, limit):
    # the graph's thread id, in a config dict handed (by mistake) to the fallback handler's
    # parameter: a dict has no tool to bind
    config = {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": limit}
    return run_with_retry(agent, prompt, config)


def chat_with_fallback(agent, prompt):
    tools = [{"name": f"search_{uuid.uuid4().hex[:6]}", "description": "Search.", "parameters": {}}]
    return run_with_retry(agent, prompt, FallbackHandler({}, tools))  # PC002: 41


def chat_direct(prompt):
    tools = [{"name": f"search_{uuid.uuid4().hex[:6]}", "description": "Search.", "parameters": {}}]
    return FallbackHandler({}, tools).handle_failure("search", [("user", prompt)])  # PC002: 11
