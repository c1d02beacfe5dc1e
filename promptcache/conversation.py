"""``Conversation``: "commit and clear" multi-turn prompts.

A long conversation grows the uncached tail of every request and, past the vendor's lookback
window (Anthropic reads at most 20 blocks back per breakpoint,
https://platform.claude.com/docs/en/build-with-claude/prompt-caching , checked 2026-11-30), can
stop hitting the cache at all. The fix is to periodically *commit* the conversation into a
summary and *clear* the history: the frozen layer stays byte-identical (still cached), the summary
goes into the session layer, and a short history starts again.

Within one conversation, its ``prompt`` builder remembers where the previous Anthropic/Bedrock
render wrote last and slides a breakpoint in when the history grew more than 15 block positions
past it (``promptcache.lookback``), so a burst of messages does not fall out of the window;
``compact`` starts a fresh builder.

``Conversation`` tracks turns and approximate tokens, says when to compact
(``should_compact``), and ``compact(summary)`` returns the fresh conversation. Writing the
summary (usually with a model call) is the caller's job.
"""

from __future__ import annotations

from promptcache.errors import ConfigError
from promptcache.prompt import PromptBuilder, Turn
from promptcache.tokens import count_tokens

__all__ = ["DEFAULT_MAX_HISTORY_TOKENS", "DEFAULT_MAX_TURNS", "Conversation"]

#: Compact once the history holds more than this many messages (user and assistant each count).
DEFAULT_MAX_TURNS = 50
#: Compact once the history holds more than this many tokens (cl100k_base approximation).
DEFAULT_MAX_HISTORY_TOKENS = 30_000
_SUMMARY_TITLE = "Summary of the conversation so far"


class Conversation:
    """A conversation over a fixed frozen/session prompt.

    Args:
        base: the prompt's frozen and session layers. Its history and dynamic content are
            ignored (the conversation keeps its own); ``base`` itself is never modified.
        max_turns: ``should_compact`` is True once ``num_turns`` exceeds this (default 50).
        max_history_tokens: ... or once ``history_tokens`` exceeds this (default 30,000).
        summary: text of an earlier summary, placed last in the session layer under the heading
            "Summary of the conversation so far". Set by ``compact``.

    Raises:
        ConfigError: ``base`` is not a PromptBuilder, a threshold is not a positive int, or
            ``summary`` is empty.
    """

    def __init__(
        self,
        base: PromptBuilder,
        *,
        max_turns: int = DEFAULT_MAX_TURNS,
        max_history_tokens: int = DEFAULT_MAX_HISTORY_TOKENS,
        summary: str | None = None,
    ) -> None:
        if not isinstance(base, PromptBuilder):
            raise ConfigError(
                "Conversation(base) needs a PromptBuilder with the frozen and session layers, "
                f"got {type(base).__name__}"
            )
        for name, value in (("max_turns", max_turns), ("max_history_tokens", max_history_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        self.max_turns = max_turns
        self.max_history_tokens = max_history_tokens
        self.summary = summary
        self._prompt = base.fork(history=False, dynamic=False)
        # where the summary block sits in the session layer (None: no summary); content added
        # later through ``prompt`` (frozen while it is open, session blocks) is the
        # conversation's own and stays across ``compact``, the summary alone is replaced
        self._summary_at: int | None = None
        if summary is not None:
            self._summary_at = len(self._prompt.session_blocks)
            self._prompt.session(summary, title=_SUMMARY_TITLE)
        # history tokens counted so far, and of how many messages: the history is append-only,
        # so messages added through ``prompt.add_user`` as well are counted when next asked
        self._history_tokens = 0
        self._counted = 0

    @property
    def prompt(self) -> PromptBuilder:
        """The builder to render from (frozen + session + summary + history). Add the current
        question with ``prompt.dynamic(...)`` and ``prompt.clear_dynamic()`` after the request."""
        return self._prompt

    @property
    def history(self) -> tuple[Turn, ...]:
        """History messages since the last compaction, oldest first."""
        return self._prompt.history

    @property
    def num_turns(self) -> int:
        """Number of history messages (a user message and an assistant message are 2 turns)."""
        return len(self._prompt.history)

    @property
    def history_tokens(self) -> int:
        """Approximate tokens of the history text (``cl100k_base``; see promptcache.tokens),
        messages added through ``prompt.add_user``/``prompt.add_assistant`` included."""
        history = self._prompt.history
        for turn in history[self._counted :]:
            self._history_tokens += count_tokens(turn.text)
        self._counted = len(history)
        return self._history_tokens

    def add_user(self, text: str) -> Conversation:
        """Append a user message. Returns ``self``."""
        self._prompt.add_user(text)
        return self

    def add_assistant(self, text: str) -> Conversation:
        """Append an assistant message. Returns ``self``."""
        self._prompt.add_assistant(text)
        return self

    def should_compact(self) -> bool:
        """True once ``num_turns > max_turns`` or ``history_tokens > max_history_tokens``."""
        return self.num_turns > self.max_turns or self.history_tokens > self.max_history_tokens

    def compact(self, summary: str) -> Conversation:
        """Commit and clear: a new conversation with ``summary`` in the session layer.

        The new conversation has the same frozen and session layers, what was added through
        ``prompt`` included (so the frozen cache still hits), ``summary`` as its last session
        block (replacing any earlier summary: write it to cover the earlier summary too), an
        empty history, and the same thresholds. ``self`` is unchanged.

        Raises:
            ConfigError: ``summary`` is empty or not a str.
        """
        if not isinstance(summary, str) or not summary.strip():
            raise ConfigError("compact() needs a non-empty summary of the conversation so far")
        base = self._prompt.fork(history=False, dynamic=False)
        if self._summary_at is not None:
            del base._s.session[self._summary_at]  # the new summary replaces it, placed last
        return Conversation(
            base,
            max_turns=self.max_turns,
            max_history_tokens=self.max_history_tokens,
            summary=summary,
        )
