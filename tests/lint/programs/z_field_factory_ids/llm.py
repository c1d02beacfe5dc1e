# The model client: the tools a job offers are bound to the model for each call.
from langchain_openai import ChatOpenAI


class Runner:
    def __init__(self, model: ChatOpenAI):
        self.model = model

    def bound(self, tools: list[dict]) -> ChatOpenAI:
        model = self.model
        if tools:
            model = model.bind_tools(tools)
        return model

    def call(self, messages: list, tools: list[dict]):
        return self.bound(tools).invoke(messages)
