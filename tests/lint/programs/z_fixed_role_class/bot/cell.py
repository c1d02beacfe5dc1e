# Message classes whose class body fixes the role, and the request model that dumps them into
# its posted body: a SystemMessage built with only its content is a system message.
from typing import Literal

from pydantic import BaseModel


class Message(BaseModel):
    role: str
    content: str


class SystemMessage(Message):
    role: Literal["system"] = "system"


class UserMessage(Message):
    role: Literal["user"] = "user"


class ChatRequest(BaseModel):
    model: str = "gpt-4o"
    messages: list[Message]

    async def send(self, session, base_url: str):
        body = self.model_dump(exclude_none=True)
        response = await session.post(base_url + "/chat/completions", json=body)
        return response.json()
