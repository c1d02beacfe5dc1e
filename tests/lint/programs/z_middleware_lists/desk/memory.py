# Middlewares an agent runs over its system prompt. A memory middleware keeps the folder it
# stores notes in (from the environment, or made for the run) and adds a constant line; a
# persona middleware adds its persona, from the environment unless it is given one.
import os
import tempfile

from deskkit import MiddlewareBase

NOTE = "Look up your notes before you answer."


class MemoryMiddleware(MiddlewareBase):
    def __init__(self, notes_dir=".notes", mode="both"):
        self._notes_dir = notes_dir
        self._mode = mode

    async def on_prompt(self, agent, prompt):
        return prompt + "\n" + NOTE


class PersonaMiddleware:
    def __init__(self, persona=None):
        self._persona = persona or os.environ.get("DESK_PERSONA", "a desk clerk")

    async def on_prompt(self, agent, prompt):
        return prompt + "\nYou are " + self._persona + "."


NOTES_DIR = os.environ.get("DESK_NOTES_DIR") or tempfile.mkdtemp()
