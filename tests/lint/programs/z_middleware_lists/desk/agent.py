# Agents that run middlewares over their system prompt: a list of middlewares of any class
# (each `mw.on_prompt(...)` of a class the agent cannot name: what a middleware holds in its
# fields is not in what it returns), or one persona middleware the agent's constructor builds,
# whose method returns the persona it holds (found where the agent sends its system prompt).
import anthropic

from desk.memory import PersonaMiddleware

client = anthropic.Anthropic()


class Agent:
    def __init__(self, middlewares=None):
        self._prompt_middlewares = [m for m in middlewares if m.is_implemented("on_prompt")]

    async def _system(self):
        result = "You help with data."
        for mw in self._prompt_middlewares:
            result = await mw.on_prompt(self, result)
        return result

    async def ask(self, question):
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=512,
            system=await self._system(),
            messages=[{"role": "user", "content": question}],
        )


class PersonaAgent:
    def __init__(self):
        self._persona = PersonaMiddleware()

    async def _system(self):
        return await self._persona.on_prompt(self, "You help with data.")

    async def ask(self, question):
        return client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=512,
            system=await self._system(),  # PC017: 19
            messages=[{"role": "user", "content": question}],
        )
