"""A small chat loop on top of the wrapper."""

from __future__ import annotations

from .augmented_llm import AugmentedLLM


def chat(questions: list[str]) -> list[str]:
    llm = AugmentedLLM("You answer questions about the city's bus timetable.")
    return [llm.generate(q) for q in questions]
