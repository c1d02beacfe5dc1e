# Wrong chains across modules: a session's last-seen time and request id are stored into
# their own fields; only the field that the prompt reads reaches the prompt.
import time
import uuid


class Session:
    def __init__(self, name: str):
        self.name = name
        self.last_seen = 0.0
        self.request_id = ""
        self.header = ""

    def touch(self) -> None:
        self.last_seen = time.time()
        self.request_id = uuid.uuid4().hex

    def stamp(self) -> None:
        self.header = f"Now: {time.time()}"

    def prompt(self) -> str:
        return f"You help {self.name}."

    def stamped_prompt(self) -> str:
        return f"{self.header}\nYou help {self.name}."
