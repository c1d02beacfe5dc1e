"""Build the engine's ``Tokenizer`` from a GGUF file's vocabulary (``tokenizers`` library).

A GGUF file has no ``tokenizer.json``: llama.cpp stores the vocabulary as metadata
(``tokenizer.ggml.model``, ``.tokens``, ``.scores``, ``.token_type``, ``.merges``, the special
token ids and ``tokenizer.chat_template``; https://github.com/ggml-org/ggml/blob/master/docs/gguf.md,
checked 2026-12-01). Two vocabularies are rebuilt, the way transformers 5's GGUF loader does
(``integrations/gguf/gguf_tokenizer_mapping.py``), so token ids match ``AutoTokenizer`` loading the
same file:

- ``gpt2``: byte-level BPE from the tokens and merges; GPT-2's byte-level pre-tokenizer, or the
  split regex of the ``tokenizer.ggml.pre`` types in ``PRE_TOKENIZER_SPLITS``.
- ``llama``: sentencepiece BPE with byte fallback and a ``▁`` Metaspace pre-tokenizer; the merges
  are recovered from the tokens and their scores (a merge ranks by the score of the token it
  makes). BOS is added unless ``tokenizer.ggml.add_bos_token`` is false.

Tokens typed CONTROL (3) or UNKNOWN (2) become special added tokens, USER_DEFINED (4) plain
added tokens, so ``<|im_start|>`` is one token and not cut into pieces.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from promptcache.errors import ModelLoadError

from .chat_template import compile_template
from .gguf_file import metadata, open_gguf
from .tokenizer import Tokenizer, _set_post_processor

__all__ = ["PRE_TOKENIZER_SPLITS", "TOKENIZER_MODELS", "byte_unicode", "tokenizer_from_gguf"]

#: ``tokenizer.ggml.model`` values this module builds.
TOKENIZER_MODELS = ("gpt2", "llama")

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: ``tokenizer.ggml.pre`` -> the regex its vocabulary's text is split with before BPE (llama.cpp's
#: ``llama-vocab.cpp`` and transformers' table); other types use GPT-2's byte-level regex.
PRE_TOKENIZER_SPLITS = {
    "llama3": _LLAMA3_SPLIT,
    "llama-v3": _LLAMA3_SPLIT,
    "llama-bpe": _LLAMA3_SPLIT,
    "smaug-bpe": _LLAMA3_SPLIT,
    "qwen2": _QWEN2_SPLIT,
    "deepseek-r1-qwen": _QWEN2_SPLIT,
}

_UNKNOWN, _CONTROL, _USER_DEFINED = 2, 3, 4
_SPECIAL_IDS = {
    "bos_token": "bos_token_id",
    "eos_token": "eos_token_id",
    "unk_token": "unknown_token_id",
    "pad_token": "padding_token_id",
}


@lru_cache(maxsize=1)
def byte_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (``bytes_to_unicode``): printable Latin-1 bytes
    map to themselves, the other 68 bytes to U+0100 onwards."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def tokenizer_from_gguf(path: str | Path) -> Tokenizer:
    """The ``Tokenizer`` a GGUF file describes, with its special tokens and chat template(s).

    Raises:
        ModelLoadError: no vocabulary, a ``tokenizer.ggml.model`` outside ``TOKENIZER_MODELS``,
            or a chat template that does not compile (names the file).
    """
    path = Path(path)
    reader = open_gguf(path)
    model = metadata(reader, "tokenizer.ggml.model")
    tokens: list[str] | None = metadata(reader, "tokenizer.ggml.tokens")
    if model not in TOKENIZER_MODELS or not tokens:
        shown = "no vocabulary" if not tokens else f"tokenizer model {model!r}"
        raise ModelLoadError(
            f"{path}: {shown} is not supported; the engine builds GGUF tokenizers of type "
            f"{', '.join(TOKENIZER_MODELS)}"
        )
    types: list[int] = metadata(reader, "tokenizer.ggml.token_type") or []
    spelled: set[str] | None
    if model == "gpt2":
        backend, spelled = _byte_level(reader, tokens)
        add_bos = bool(metadata(reader, "tokenizer.ggml.add_bos_token", False))
    else:
        backend, spelled = _sentencepiece(reader, tokens)
        add_bos = bool(metadata(reader, "tokenizer.ggml.add_bos_token", True))
    _add_typed_tokens(backend, tokens, types, spelled)
    special = {
        name: tokens[i]
        for name, key in _SPECIAL_IDS.items()
        if isinstance(i := metadata(reader, f"tokenizer.ggml.{key}"), int) and 0 <= i < len(tokens)
    }
    flags = {
        "add_bos_token": add_bos,
        "add_eos_token": bool(metadata(reader, "tokenizer.ggml.add_eos_token", False)),
    }
    _set_post_processor(backend, flags, special)
    templates = _chat_templates(reader)
    for name, source in templates.items():
        compile_template(source, f"{path} ({name} chat template)")
    return Tokenizer(backend, special, templates)


def _byte_level(reader: Any, tokens: list[str]) -> tuple[Any, set[str]]:
    """Byte-level BPE (``tokenizer.ggml.model == "gpt2"``) and its byte alphabet."""
    from tokenizers import Regex, decoders, pre_tokenizers
    from tokenizers import Tokenizer as Backend
    from tokenizers.models import BPE

    table = byte_unicode()
    alphabet = set(table.values())
    vocab = {
        token if set(token) <= alphabet else "".join(table[b] for b in token.encode("utf-8")): i
        for i, token in enumerate(tokens)
    }
    merges = [tuple(m.split(" ", 1)) for m in metadata(reader, "tokenizer.ggml.merges") or []]
    backend = Backend(
        BPE(vocab=vocab, merges=merges, continuing_subword_prefix="", end_of_word_suffix="")
    )
    prefix = bool(metadata(reader, "tokenizer.ggml.add_space_prefix", False))
    split = PRE_TOKENIZER_SPLITS.get(metadata(reader, "tokenizer.ggml.pre"))
    if split is None:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix)
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=prefix, use_regex=False),
            ]
        )
    backend.decoder = decoders.ByteLevel()
    return backend, alphabet


def _sentencepiece(reader: Any, tokens: list[str]) -> tuple[Any, None]:
    """Sentencepiece BPE (``tokenizer.ggml.model == "llama"``) with byte fallback."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import decoders, pre_tokenizers
    from tokenizers.models import BPE

    scores: list[float] = metadata(reader, "tokenizer.ggml.scores") or [0.0] * len(tokens)
    vocab = {token: i for i, token in enumerate(tokens)}
    merges = metadata(reader, "tokenizer.ggml.merges")
    pairs = (
        [tuple(m.split(" ", 1)) for m in merges]
        if merges
        else _merges_from_scores(vocab, dict(zip(tokens, scores, strict=False)))
    )
    backend = Backend(BPE(vocab=vocab, merges=pairs, fuse_unk=True, byte_fallback=True))
    prefix = bool(metadata(reader, "tokenizer.ggml.add_space_prefix", True))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="first" if prefix else "never", split=False
    )
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if prefix:
        steps.append(decoders.Strip(content=" ", left=1))
    backend.decoder = decoders.Sequence(steps)
    return backend, None


def _merges_from_scores(vocab: dict[str, int], scores: dict[str, float]) -> list[tuple[str, str]]:
    """Sentencepiece merges implied by a vocabulary: every split of a token into two tokens,
    ranked by the score of the token they make, best first; ties go to the longer left piece,
    then the longer right piece, then the earlier token and smaller ids (transformers'
    ``generate_merges`` order, so both build the same BPE)."""
    ranked: list[tuple[float, int, int, str, str]] = []
    for token, score in scores.items():
        splits = [
            (token[:cut], token[cut:])
            for cut in range(1, len(token))
            if token[:cut] in vocab and token[cut:] in vocab
        ]
        splits.sort(key=lambda pair: (vocab[pair[0]], vocab[pair[1]]))
        ranked.extend((-score, -len(left), -len(right), left, right) for left, right in splits)
    ranked.sort(key=lambda r: r[:3])  # stable: equal keys keep token, then id, order
    return [(r[3], r[4]) for r in ranked]


def _add_typed_tokens(
    backend: Any, tokens: list[str], types: list[int], spelled: set[str] | None
) -> None:
    """Add CONTROL/UNKNOWN tokens as special and USER_DEFINED ones as plain added tokens.

    In a byte-level vocabulary a control token using characters outside the byte alphabet is a
    mislabel (its id would be taken twice), so it is skipped, as transformers does.
    """
    from tokenizers import AddedToken

    special = [
        AddedToken(t, normalized=False, special=True)
        for t, kind in zip(tokens, types, strict=False)
        if kind in (_UNKNOWN, _CONTROL) and (spelled is None or set(t) <= spelled)
    ]
    if special:
        backend.add_special_tokens(special)
    plain = [
        AddedToken(t, normalized=False, special=False)
        for t, kind in zip(tokens, types, strict=False)
        if kind == _USER_DEFINED
    ]
    if plain:
        backend.add_tokens(plain)


def _chat_templates(reader: Any) -> dict[str, str]:
    """``tokenizer.chat_template`` as "default" plus the named ``tokenizer.chat_template.NAME``
    templates listed in ``tokenizer.chat_templates``."""
    templates: dict[str, str] = {}
    default = metadata(reader, "tokenizer.chat_template")
    if isinstance(default, str):
        templates["default"] = default
    for name in metadata(reader, "tokenizer.chat_templates") or []:
        source = metadata(reader, f"tokenizer.chat_template.{name}")
        if isinstance(source, str):
            templates[str(name)] = source
    return templates
