from agent.fallback import FallbackHandler


class ToolError(Exception):
    def __init__(self, name):
        self.name = name


def _handle(error, fallback_handler: FallbackHandler | None, messages):
    if not fallback_handler:
        return None
    return fallback_handler.handle_failure(error.name, messages)


def run_with_retry(agent, prompt: str, fallback_handler: FallbackHandler | None = None):
    messages = [("user", prompt)]
    for _ in range(3):
        try:
            return agent.invoke({"messages": messages})
        except ToolError as error:
            _handle(error, fallback_handler, messages)
    return None
