"""How much of StoryTime's instructions the demo sends: all of them, unless the model's context
is too short for the workload's largest request.

``examples/storytime_instructions.md`` is about 1,500 tokens (SmolLM2's tokenizer), in sections
that start at ``## `` headings. SmolLM2-135M-Instruct has 8,192 positions and gets the whole
file. A model with a short context (tinystories-656k: 512 positions, the fast tests' model) gets
the longest run of leading sections with which every request of the workload still fits:
system prompt, three earlier turns with answers of ``max_tokens``, the question, and room for
its own answer, rendered with the model's chat template and counted by its tokenizer, as the
engine server does. Both apps always get the same text, and the demo prints what was sent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from promptcache.errors import ConfigError

from .workload import UserPlan

__all__ = [
    "InstructionsFit",
    "describe_instructions",
    "fit_instructions",
    "longest_request_tokens",
    "split_sections",
]

#: A re-tokenised answer may take a few tokens more than the ``max_tokens`` it was sampled in.
ANSWER_SLACK_TOKENS = 4
_SECTION = re.compile(r"(?m)^(?=## )")


def split_sections(text: str) -> list[str]:
    """``text`` cut before each ``## `` heading; the pieces joined give ``text`` back."""
    return [part for part in _SECTION.split(text) if part]


def longest_request_tokens(
    app: ModuleType,
    plans: Sequence[UserPlan],
    instructions: str,
    tokenizer: Any,
    *,
    max_tokens: int,
) -> int:
    """The most tokens one request of the workload can occupy: its prompt plus ``max_tokens``
    of answer, where each earlier answer counts as ``max_tokens + ANSWER_SLACK_TOKENS``.

    Args:
        app: ``examples/naive_app.py`` or ``layered_app.py`` as a module (``StoryTime`` with
            ``messages_for``, ``remember`` and ``new_story``).
        plans: the workload (``plan_workload``).
        instructions: the system prompt text both apps would send.
        tokenizer: the engine's ``Tokenizer`` of the served model, its chat template set.
        max_tokens: the answer limit per request, in tokens.
    """
    longest = 0
    for plan in plans:
        story = app.StoryTime(
            None, "demo", app.Child(*plan.child), max_tokens=max_tokens, instructions=instructions
        )
        for arc in plan.conversations:
            story.new_story()
            for turn, question in enumerate(arc):
                messages = story.messages_for(question)
                text = tokenizer.apply_chat_template(messages)
                prompt = len(tokenizer.encode(text, add_special_tokens=False))
                earlier_answers = turn * (max_tokens + ANSWER_SLACK_TOKENS)
                longest = max(longest, prompt + earlier_answers + max_tokens)
                story.remember(messages[-1]["content"], ".")
    return longest


@dataclass(frozen=True)
class InstructionsFit:
    """The instructions the demo sends.

    Attributes:
        text: the system prompt text (leading sections of the file).
        sections: how many sections ``text`` holds; ``total_sections``: how many the file has.
        tokens: ``text`` alone, in the model's tokens.
        longest_request_tokens: the largest request of the workload with ``text``, answer
            included (at most ``max_model_len``).
        max_model_len: the served model's context, in tokens.
    """

    text: str
    sections: int
    total_sections: int
    tokens: int
    longest_request_tokens: int
    max_model_len: int

    @property
    def complete(self) -> bool:
        return self.sections == self.total_sections


def fit_instructions(
    instructions: str,
    apps: Sequence[ModuleType],
    plans: Sequence[UserPlan],
    tokenizer: Any,
    *,
    max_model_len: int,
    max_tokens: int,
) -> InstructionsFit:
    """The longest leading run of ``instructions``' sections with which every app's largest
    request fits ``max_model_len`` tokens.

    Raises:
        ConfigError: not even the first section fits; the message says what to lower.
    """
    sections = split_sections(instructions)
    for count in range(len(sections), 0, -1):
        text = "".join(sections[:count]).rstrip("\n")
        longest = max(
            longest_request_tokens(app, plans, text, tokenizer, max_tokens=max_tokens)
            for app in apps
        )
        if longest <= max_model_len:
            return InstructionsFit(
                text=text,
                sections=count,
                total_sections=len(sections),
                tokens=len(tokenizer.encode(text, add_special_tokens=False)),
                longest_request_tokens=longest,
                max_model_len=max_model_len,
            )
    raise ConfigError(
        f"the model's context ({max_model_len} tokens) cannot hold a four-turn story with "
        f"answers of {max_tokens} tokens and even the first section of the instructions; "
        "lower --max-tokens or use a model with a longer context"
    )


def describe_instructions(fit: InstructionsFit, model: str, path: str) -> str:
    """One line saying which system prompt this run sends, and why, with its token counts."""
    if fit.complete:
        return (
            f"system prompt: all of {path}, {fit.tokens:,} tokens; the largest request, with "
            f"answers of full length, needs about {fit.longest_request_tokens:,} of the "
            f"{fit.max_model_len:,}-token context"
        )
    return (
        f"system prompt: the first {fit.sections} of {fit.total_sections} sections of {path}, "
        f"{fit.tokens:,} tokens, so that the largest request (about "
        f"{fit.longest_request_tokens:,} tokens with answers of full length) fits {model}'s "
        f"{fit.max_model_len:,}-token context"
    )
