"""Streaming detokenisation and stop strings that may span token boundaries.

``IncrementalDetokenizer`` turns one sequence's output tokens into text a piece at a time, using
vLLM's two-offset method: decode a short window that starts a few tokens *before* the new ones
(``prefix_offset``) and emit only what the new tokens add to it. Decoders that strip a leading
space or merge byte-fallback pieces therefore behave as in a full decode, and a piece that ends
in an incomplete UTF-8 character (decoded as U+FFFD) is held back until the next token completes
it. Cost per step is a decode of about six tokens, not of the whole output.

The text is the continuation of the prompt: the prompt's last tokens seed the window, so
"Once upon a" + " time" yields " time", with the leading space.

Stop strings are searched only in the region the new piece could complete, so a stop string
split over several tokens ("\\n\\nUser" as "\\n", "\\n", "User") is found; the text is cut just
before it. While a request runs, the last ``max(len(stop)) - 1`` characters are withheld from
``visible_text`` so a streamed prefix of a stop string is never sent and then retracted.
"""

from __future__ import annotations

from collections.abc import Sequence

from .tokenizer import Tokenizer

__all__ = ["IncrementalDetokenizer"]

#: Prompt tokens decoded ahead of the first output token
#: (vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET).
_CONTEXT_TOKENS = 5


class IncrementalDetokenizer:
    """Text and stop-string state of one sequence.

    Args:
        tokenizer: the model's tokenizer.
        prompt_token_ids: the prompt (decoded only as context for the first pieces).
        stop_strings: strings that end generation when they appear in the output text.
        skip_special_tokens: leave BOS/EOS and other special tokens out of the text.

    Attributes:
        text: output text so far, cut before a stop string once one is found.
        stop_string: the stop string that matched, or None.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        prompt_token_ids: Sequence[int],
        stop_strings: Sequence[str] = (),
        skip_special_tokens: bool = True,
    ) -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = list(prompt_token_ids)
        self._prefix_offset = max(len(self._ids) - _CONTEXT_TOKENS, 0)
        self._read_offset = len(self._ids)
        self._skip_special = skip_special_tokens
        self._stop_strings = tuple(stop_strings)
        self._holdback = max((len(s) for s in self._stop_strings), default=1) - 1
        self.text = ""
        self.stop_string: str | None = None

    def add_tokens(self, token_ids: Sequence[int]) -> str | None:
        """Append newly sampled output tokens; return the stop string they completed, or None.

        After a match, further calls are ignored (the sequence is finishing).
        """
        if self.stop_string is not None:
            return self.stop_string
        before = len(self.text)
        for token_id in token_ids:
            self._ids.append(int(token_id))
            self.text += self._next_piece()
        return self._check_stop(len(self.text) - before)

    def visible_text(self, finished: bool) -> str:
        """Text safe to show: all of it once finished, else minus a possible stop-string start."""
        if finished or self._holdback == 0:
            return self.text
        return self.text[: max(len(self.text) - self._holdback, 0)]

    def _next_piece(self) -> str:
        decode = self._tokenizer.decode
        prefix = decode(self._ids[self._prefix_offset : self._read_offset], self._skip_special)
        full = decode(self._ids[self._prefix_offset :], self._skip_special)
        if len(full) > len(prefix) and not full.endswith("\ufffd"):
            self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
            return full[len(prefix) :]
        return ""

    def _check_stop(self, num_new_chars: int) -> str | None:
        if not self._stop_strings or num_new_chars == 0:
            return None
        best: tuple[int, str] | None = None
        for stop in self._stop_strings:
            start = max(len(self.text) - num_new_chars - len(stop) + 1, 0)
            index = self.text.find(stop, start)
            if index != -1 and (best is None or index < best[0]):
                best = (index, stop)
        if best is None:
            return None
        self.text = self.text[: best[0]]
        self.stop_string = best[1]
        return best[1]
