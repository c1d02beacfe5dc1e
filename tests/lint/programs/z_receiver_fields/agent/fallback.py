from langchain_openai import ChatOpenAI


class FallbackHandler:
    def __init__(self, config, tools):
        self.config = config
        self.tools = tools
        self.tool_to_bind = None

    def handle_failure(self, name, messages):
        self.tool_to_bind = self._find(name)
        return self.invoke(messages)

    def _find(self, name):
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None

    def invoke(self, messages):
        model = ChatOpenAI(model="gpt-4o")
        bound = model.bind_tools([self.tool_to_bind])
        return bound.invoke(messages)
