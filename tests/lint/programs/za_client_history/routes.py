# No trigger word here: the web routes pass the question and the history their client sent
# with the request; chat is imported under another name.
from fastapi import APIRouter
from pydantic import BaseModel
from service import chat as chat_service
from service import chat_in_newest

router = APIRouter()


class Turn(BaseModel):
    role: str
    content: str


class AskRequest(BaseModel):
    question: str
    history: list[Turn] = []


@router.post("/ask")
def ask(data: AskRequest):
    history = [{"role": m.role, "content": m.content} for m in data.history]
    return chat_service(question=data.question, history=history)  # PC010: 56


@router.post("/ask-newest")
def ask_newest(data: AskRequest):
    # the look-alike: the context is in the newest message
    history = [{"role": m.role, "content": m.content} for m in data.history]
    return chat_in_newest(data.question, history)


@router.post("/ask-alone")
def ask_alone(data: AskRequest):
    # the look-alike: a single-turn request, no history sent
    return chat_service(question=data.question, history=[])


def replay(question: str, saved: list[dict]):
    # the look-alike: not a route's handler, the history's source is not known
    return chat_service(question=question, history=saved)
