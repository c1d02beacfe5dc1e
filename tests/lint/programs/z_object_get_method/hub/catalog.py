# A catalog of tool definitions. It keeps a downloads helper (holding the cache folder) to
# store what the tools return.
from .files import Downloads


class Catalog:
    def __init__(self, provider):
        self._downloads = Downloads()
        self.provider = provider

    def get(self, user_id: str, names: list[str] | None = None) -> list[dict]:
        return [
            {"name": name, "description": f"Run {name}.", "input_schema": {"type": "object"}}
            for name in names or []
        ]
