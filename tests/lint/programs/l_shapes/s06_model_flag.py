# Shape 6: a condition fixed per model is configuration; a condition on the question varies
# per request.
import anthropic

client = anthropic.Anthropic()
TOOLS = [{"name": "search", "description": "Search.", "input_schema": {}}]


class Model:
    def __init__(self, name: str, supports_tools: bool):
        self.name = name
        self.supports_tools = supports_tools

    def ask(self, history: list, tools: list | None = None):
        kwargs = {}
        if tools and self.supports_tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = {"type": "auto"}
        return client.messages.create(
            model=self.name, max_tokens=256, messages=history, **kwargs
        )


def ask_some_tools(history: list, question: str):
    tools = TOOLS if "search" in question else []
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        tools=tools,  # PC006: 14
        messages=[*history, {"role": "user", "content": question}],
    )


class Chat:
    def __init__(self, model: str, supports_tools: bool):
        self.model = model
        self.supports_tools = supports_tools

    def ask(self, messages: list, tools: list | None = None):
        return client.messages.create(
            model=self.model,
            max_tokens=256,
            messages=messages,
            tools=tools if tools and self.supports_tools else [],
            tool_choice={"type": "auto"} if tools and self.supports_tools else {"type": "none"},
        )


def ask_structured(history: list, tools=None, response_type: str = "text", response_schema=None):
    # a call's settings named after the response (its type, its schema) are fixed per call
    # site, not per turn: each caller asks for text, JSON or tool use the same way every time
    settings: dict = {}
    if tools:
        settings["tools"] = tools
    elif response_type == "json_object":
        settings["output_format"] = "json"
        if response_schema:
            settings["schema"] = response_schema
    return _send(history, settings)


def _send(history: list, settings: dict):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        messages=history,
        tools=settings.get("tools") or [],
        output_config={"format": settings.get("output_format", "text")},
    )


def ask_per_turn(history: list, turn_count: int):
    # a count of the turns so far changes every request
    tools = TOOLS if turn_count > 2 else []
    return client.messages.create(
        model="claude-sonnet-4-5", max_tokens=256, messages=history, tools=tools  # PC006: 75
    )
