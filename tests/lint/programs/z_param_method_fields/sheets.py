# A character sheet is a dataclass whose `created_at` field its factory stamps with the clock;
# its other fields are the game's. A store hands out a sheet it loaded, or one it made.
import json
import time
from dataclasses import dataclass, field


@dataclass
class Sheet:
    name: str = "Adventurer"
    level: int = 1
    inventory: str = "[]"
    created_at: float = field(default_factory=time.time)

    def inventory_list(self) -> list:
        return json.loads(self.inventory)

    def heading(self) -> str:
        return f"{self.name} (level {self.level})"

    def age_text(self) -> str:
        return f"made at {self.created_at}"


class SheetStore:
    def __init__(self) -> None:
        self.rows: dict = {}

    def load(self, user_id: int):
        return None

    def get_or_create(self, user_id: int) -> Sheet:
        sheet = self.load(user_id)
        if sheet:
            return sheet
        return Sheet(name=f"user {user_id}")
