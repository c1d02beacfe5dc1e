"""Prompt builders that read one field of the export they are handed."""

from models import Export


def developer_message(text: str) -> dict:
    return {"role": "developer", "content": text}


def from_session_id(export: Export) -> dict:
    # two fields deep: the session's id, not its start time
    return developer_message("Session " + export.session.session_id)


def from_agent_prompt(export: Export) -> dict:
    return developer_message(export.session.agent.prompt)


def from_note(export: Export) -> dict:
    # one field deep: the note itself
    return developer_message("Note: " + export.note)
