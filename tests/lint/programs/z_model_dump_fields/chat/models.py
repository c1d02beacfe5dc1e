# Pydantic models of the program: a chat message and a note stamped when it is made.
from datetime import datetime

from pydantic import BaseModel


class ChatMessage(BaseModel):
    role: str
    content: str


class Note(BaseModel):
    content: str
    created_at: datetime
