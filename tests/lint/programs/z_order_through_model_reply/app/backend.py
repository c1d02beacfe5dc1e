from . import claude, gpt


def query(system_message: str, model: str):
    query_func = claude.query if model.startswith("claude-") else gpt.query
    return query_func(system_message=system_message, model=model)
