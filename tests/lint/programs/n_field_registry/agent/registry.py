# A tool registry filled in one module and read in another: what any code stores into its
# field in an unstable order is what every reader of that field may get.


class Tool:
    def __init__(self, name: str, description: str) -> None:
        self.name = name
        self.description = description

    def to_schema(self) -> dict:
        return {"name": self.name, "description": self.description, "input_schema": {}}


class Registry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._skills: dict[str, str] = {}

    def register(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def add_skill(self, name: str, text: str) -> None:
        self._skills[name] = text

    def definitions(self) -> list[dict]:
        return [tool.to_schema() for tool in self._tools.values()]

    def sorted_definitions(self) -> list[dict]:
        return [tool.to_schema() for tool in sorted(self._tools.values(), key=lambda t: t.name)]

    def skill_text(self) -> str:
        return "\n".join(self._skills.values())
