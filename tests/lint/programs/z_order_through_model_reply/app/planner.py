import json

from .backend import query


def next_idea(tried: set, model: str):
    listed = ", ".join(list(tried))
    return query(system_message=f"Propose one new setting. Tried: {listed}", model=model)  # PC004: 67


def review(tried: set, model: str):
    # the model's answer is dumped: its keys come in the order the model wrote them, and the
    # set reaches it only through the backend's call, which the analysis cannot see
    idea = next_idea(tried, model)
    return query(system_message="Review this plan:\n" + json.dumps(idea, indent=2), model=model)


def compare(tried: set, model: str):
    # a dict whose keys are inserted while iterating the set: their order changes
    lengths = {name: len(name) for name in tried}
    return query(system_message="Setting lengths:\n" + json.dumps(lengths), model=model)  # PC003: 55
