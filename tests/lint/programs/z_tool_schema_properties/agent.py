# the schema copies each tool's parameters["properties"]; every request sends the schemas
from copy import deepcopy

import openai

from tools import NotedSnippetRunner, SnippetRunner, SortedSnippetRunner

client = openai.OpenAI()


def tool_schema(tool):
    properties = deepcopy(tool.parameters["properties"])
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.summary,
            "parameters": {"type": "object", "properties": properties},
        },
    }


def step(tools, question):
    return client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": question}],
        tools=[tool_schema(t) for t in tools],
    )


def run(question):
    return step([SnippetRunner()], question)  # PC004: 16


def run_sorted(question):
    return step([SortedSnippetRunner()], question)


def run_noted(question):
    return step([NotedSnippetRunner()], question)
