# Shape 5: an id made once and kept in the history is frozen there; an id made afresh for every
# earlier message on every request is not.
import uuid

import openai

client = openai.OpenAI()


def run_tools(history: list, response) -> None:
    for call in response.choices[0].message.tool_calls:
        call_id = call.id or f"call_{id(call)}"
        history.append({"role": "assistant", "tool_calls": [{"id": call_id, "type": "function"}]})
        history.append({"role": "tool", "tool_call_id": call_id, "content": "done"})


def chat(history: list, question: str):
    history.append({"role": "user", "content": question})
    response = client.chat.completions.create(model="gpt-5", messages=history)
    run_tools(history, response)
    return client.chat.completions.create(model="gpt-5", messages=history)


def replay(history: list, question: str):
    messages = [{"role": "system", "content": f"Run {uuid.uuid4().hex}"}]  # PC002: 53
    messages += history
    messages.append({"role": "user", "content": question})
    return client.chat.completions.create(model="gpt-5", messages=messages)


class Agent:
    def __init__(self):
        self.history: list = [{"role": "system", "content": "Use the tools."}]

    def step(self, question: str):
        self.history.append({"role": "user", "content": question})
        response = client.chat.completions.create(model="gpt-5", messages=self.history)
        for call in response.choices[0].message.tool_calls or []:
            call_id = call.id or f"call_{id(call)}"
            self.history.append(
                {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function"}]}
            )
            self.history.append({"role": "tool", "tool_call_id": call_id, "content": "ok"})
        return response


def render(history: list) -> list:
    return [{"role": m["role"], "content": f"{m['text']} [{uuid.uuid4().hex}]"} for m in history]


def chat_rendered(history: list, question: str):
    return client.chat.completions.create(
        model="gpt-5",
        messages=[*render(history), {"role": "user", "content": question}],  # PC002: 18
    )
