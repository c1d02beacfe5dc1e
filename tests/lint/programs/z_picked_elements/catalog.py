"""Prompt entries read from a folder tree in filesystem order, helpers that pick one entry
from a list they are given, and helpers that list every entry in the list's order."""

from __future__ import annotations

import os
from dataclasses import dataclass

import yaml

PROMPT_DIR = "prompts"


@dataclass
class Entry:
    task: str
    models: list[str]
    content: str


def _load() -> list[Entry]:
    items = []
    for root, _dirs, files in os.walk(PROMPT_DIR):
        for name in files:
            with open(os.path.join(root, name)) as fh:
                items.extend(yaml.safe_load(fh)["entries"])
    return [Entry(**item) for item in items]


ENTRIES = _load()


def best_for(task: str, model: str, entries: list[Entry]) -> Entry | None:
    best, best_score = None, 0.0
    for entry in entries:
        if entry.task != task:
            continue
        score = 1.0 if model in entry.models else 0.2
        if score >= best_score:
            best_score, best = score, entry
    return best


def first_for(task: str, entries: list[Entry]) -> Entry | None:
    for entry in entries:
        if entry.task == task:
            return entry
    return None


def next_for(task: str, entries: list[Entry]) -> Entry | None:
    return next((entry for entry in entries if entry.task == task), None)


def longest(entries: list[Entry]) -> Entry:
    return max(entries, key=lambda entry: len(entry.content))


def shortest(entries: list[Entry]) -> Entry:
    return min(entries, key=lambda entry: len(entry.content))


def by_task(entries: list[Entry]) -> dict[str, Entry]:
    return {entry.task: entry for entry in entries}


def listed(entries: list[Entry]) -> str:
    lines = []
    for entry in entries:
        lines.append(entry.content)
    return "\n".join(lines)


def concatenated(entries: list[Entry]) -> str:
    text = ""
    for entry in entries:
        text = text + entry.content + "\n"
    return text


def added(entries: list[Entry]) -> str:
    text = ""
    for entry in entries:
        text += f"- {entry.content}\n"
    return text


def numbered(entries: list[Entry]) -> str:
    return "\n".join(f"{i}. {entry.content}" for i, entry in enumerate(entries))


def first_lines(entries: list[Entry]) -> str:
    lines = []
    for entry in entries:
        if entry.content:
            lines.append(entry.content.splitlines()[0])
        if len(lines) > 3:
            return "\n".join(lines)
    return "\n".join(lines)


def next_content(task: str, entries: list[Entry]) -> str:
    return next(entry.content for entry in entries if entry.task == task)


def greatest_content(entries: list[Entry]) -> str:
    return max(entry.content for entry in entries)


def keyed_content(entries: list[Entry]) -> str:
    table = {entry.task: entry.content for entry in entries}
    return table["qa"]


def last_of(entries: list[Entry]) -> str:
    last = ""
    for entry in entries:
        last = entry.content
    return last


def first_of(entries: list[Entry]) -> str:
    for entry in entries:
        return entry.content
    return ""


def last_skipping(task: str, entries: list[Entry]) -> str:
    chosen = ""
    for entry in entries:
        if entry.task != task:
            continue
        chosen = entry.content
    return chosen
