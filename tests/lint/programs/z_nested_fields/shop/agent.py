# An agent whose system prompt comes from a builder it is given (of a class the linter cannot
# see), or tells the persona it was built with; its service's fields are not in either.
class Request:
    def __init__(self, messages, system_prompt=None):
        self.messages = messages
        self.system_prompt = system_prompt


class Agent:
    def __init__(self, service, builder, persona="a shop assistant"):
        self.service = service
        self.builder = builder
        self.persona = persona

    async def ask(self, question):
        system_prompt = await self.builder.build(question)
        return self.service.send(self._request(question, system_prompt))

    async def ask_as(self, question):
        system_prompt = f"You are {self.persona}."
        return self.service.send(self._request(question, system_prompt))

    def _request(self, question, system_prompt):
        return Request([{"role": "user", "content": question}], system_prompt=system_prompt)
