"""Session stores that load a record fresh or from disk, then fold the turns that overflow
the window into one system summary at the head of the history. The record is stamped with
its start time when it is built; one read from disk comes from a class method the analysis
does not follow (``Session.from_dict``). A turn is sent as the dict ``Turn.to_dict`` builds."""

import dataclasses
import json
import os
import time

WINDOW = 20


@dataclasses.dataclass
class Turn:
    role: str
    content: str

    def to_dict(self):
        """The request message this turn is sent as."""
        return {"role": self.role, "content": self.content}


@dataclasses.dataclass
class Session:
    session_id: str
    turns: list = dataclasses.field(default_factory=list)
    started_at: float = dataclasses.field(default_factory=time.time)

    @classmethod
    def from_dict(cls, data):
        turns = [Turn(role=t["role"], content=t["content"]) for t in data.get("turns", [])]
        return cls(session_id=data["session_id"], turns=turns, started_at=data["started_at"])


def load(path, session_id):
    """A new record (its ``started_at`` stamped now) or one read back from disk."""
    if not os.path.exists(path):
        return Session(session_id=session_id)
    with open(path) as fh:
        return Session.from_dict(json.load(fh))


def reopen(path, session_id):
    """The same two ways, joined in one name before it is returned."""
    if os.path.exists(path):
        with open(path) as fh:
            session = Session.from_dict(json.load(fh))
    else:
        session = Session(session_id=session_id)
    return session


class TurnStore:
    """The summary is made of the overflowing turns only (silent): the start time stays in
    the record's own field."""

    def add(self, path, session_id, role, content):
        session = load(path, session_id)
        session.turns.append(Turn(role=role, content=content))
        if len(session.turns) > WINDOW:
            overflow = session.turns[:-WINDOW]
            text = "\n".join(f"{t.role}: {t.content}" for t in overflow)
            summary = Turn(role="system", content=f"[Summary]\n{text}")
            session.turns = [summary, *session.turns[-WINDOW:]]
        return session


class StampedStore:
    """The same summary headed by the record's start time (found)."""

    def add(self, path, session_id, role, content):
        session = load(path, session_id)
        session.turns.append(Turn(role=role, content=content))
        if len(session.turns) > WINDOW:
            overflow = session.turns[:-WINDOW]
            text = "\n".join(f"{t.role}: {t.content}" for t in overflow)
            head = f"[Summary since {session.started_at}]"  # PC001: 37
            summary = Turn(role="system", content=f"{head}\n{text}")
            session.turns = [summary, *session.turns[-WINDOW:]]
        return session


class ReopenedStore:
    """Turns only, of a record from ``reopen`` (silent)."""

    def add(self, path, session_id, role, content):
        session = reopen(path, session_id)
        session.turns.append(Turn(role=role, content=content))
        text = "\n".join(f"{t.role}: {t.content}" for t in session.turns[:-WINDOW])
        session.turns = [Turn(role="system", content=text), *session.turns[-WINDOW:]]
        return session


class ReopenedStampedStore:
    """The start time of a record from ``reopen`` (found)."""

    def add(self, path, session_id, role, content):
        session = reopen(path, session_id)
        session.turns.append(Turn(role=role, content=content))
        text = "\n".join(f"{t.role}: {t.content}" for t in session.turns[:-WINDOW])
        head = f"[Summary since {session.started_at}]"  # PC001: 33
        session.turns = [Turn(role="system", content=f"{head}\n{text}"), *session.turns[-WINDOW:]]
        return session
