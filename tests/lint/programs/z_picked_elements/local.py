"""Folder listings, a set and finished futures iterated in the function that sends the
request: text gathered over them in their order, beside one element picked from them."""

from __future__ import annotations

import glob
import os
from concurrent.futures import ThreadPoolExecutor, as_completed

import anthropic

client = anthropic.Anthropic()


def _send(system: str, question: str):
    return client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=512,
        system=system,
        messages=[{"role": "user", "content": question}],
    )


def walked_notes(question: str):
    names = []
    for _root, _dirs, files in os.walk("notes"):
        for name in files:
            names.append(name)
    return _send("Notes:\n" + "\n".join(names), question)  # PC004: 30


def globbed_notes(question: str):
    text = "Notes:\n"
    for path in glob.glob("notes/*.md"):
        text += f"- {path}\n"
    return _send(text, question)  # PC004: 17


def tagged(tags: list[str], question: str):
    return _send("Tags: " + ", ".join(f"#{tag}" for tag in set(tags)), question)  # PC004: 28


def summarised(pages: list[str], question: str):
    with ThreadPoolExecutor() as pool:
        futures = [pool.submit(str.upper, page) for page in pages]
        done = []
        for future in as_completed(futures):
            done.append(future.result())
    return _send("\n".join(done), question)  # PC004: 17


def walked_pick(task: str, question: str):
    chosen = "none"
    for _root, _dirs, files in os.walk("notes"):
        for name in files:
            if name.startswith(task):
                chosen = name
    return _send(f"Use the note {chosen}.", question)


def globbed_first(task: str, question: str):
    first = next(path for path in glob.glob("notes/*.md") if task in path)
    return _send(f"Use the note {first}.", question)


def longest_tag(tags: list[str], question: str):
    return _send(f"Focus on #{max(set(tags), key=len)}.", question)
