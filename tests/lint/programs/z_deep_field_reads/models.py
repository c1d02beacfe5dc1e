"""Records of a saved chat session: the session holds its start time beside the agents'
prompts, and an export holds the session."""

from dataclasses import dataclass
from datetime import datetime


@dataclass
class AgentState:
    prompt: str


@dataclass
class Session:
    session_id: str
    started_at: datetime
    agent: AgentState


@dataclass
class Export:
    session: Session
    note: str
