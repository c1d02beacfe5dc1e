"""A registry of skills: each named skill's tool specs, merged in the order the names come."""


class Registry:
    def __init__(self, specs: dict[str, list[dict]]):
        self.specs = specs

    def tools_for(self, names) -> list[dict]:
        out: list[dict] = []
        for name in names:
            out.extend(self.specs.get(name, []))
        return out

    def sorted_tools_for(self, names) -> list[dict]:
        out: list[dict] = []
        for name in names:
            out.extend(self.specs.get(name, []))
        return sorted(out, key=lambda spec: spec["function"]["name"])

    def count(self, names) -> int:
        n = 0
        for _name in names:
            n += 1
        return n

    def knows(self, names, wanted: str) -> bool:
        return any(name == wanted for name in names)


def build_registry() -> Registry:
    return Registry({"core": [{"type": "function", "function": {"name": "explore"}}]})
