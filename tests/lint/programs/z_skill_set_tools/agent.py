"""An agent that offers the tools of the skills the model has loaded, kept in a set of names
given to a registry of another module (a registry passed in, or the default one)."""

import openai
from skills import Registry, build_registry

client = openai.OpenAI()


class Agent:
    def __init__(self, registry: Registry | None = None):
        self.registry = registry or build_registry()
        self._loaded: set[str] = set()

    def load_skill(self, name: str) -> None:
        self._loaded.add(name)

    def step(self, question: str):
        return client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": question}],
            tools=self.registry.tools_for(self._loaded),  # PC004: 18
        )

    def step_sorted(self, question: str):
        return client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": question}],
            tools=self.registry.tools_for(sorted(self._loaded)),
        )

    def step_sorted_after(self, question: str):
        return client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": question}],
            tools=self.registry.sorted_tools_for(self._loaded),
        )

    def step_counted(self, question: str):
        count = self.registry.count(self._loaded)
        system = f"{count} skills are loaded."
        return client.chat.completions.create(
            model="m",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
            tools=self.registry.tools_for(["core"]),
        )

    def step_counted_here(self, question: str):
        count = 0
        for _name in self._loaded:
            count += 1
        system = f"{count} skills are loaded."
        return client.chat.completions.create(
            model="m",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
        )

    def step_position(self, question: str):
        place = 0
        for name in self._loaded:
            if name == "search":
                break
            place += 1
        system = f"The search skill is skill number {place}."
        return client.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": system},  # PC004: 46
                {"role": "user", "content": question},
            ],
        )

    def step_known(self, question: str):
        tools = self.registry.tools_for(["core"])
        if self.registry.knows(self._loaded, "search"):
            tools = tools + self.registry.tools_for(["search"])
        return client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": question}],
            tools=tools,
        )
