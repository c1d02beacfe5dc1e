"""Chained hashes over fixed-size chunks of a request's prompt, the ``prefix`` policy's keys.

A request's *prompt stream* is the canonical JSON text of its prefix segments in prompt order
(``promptcache.fingerprint``: tools, system blocks, then the messages, or a completions
``prompt``). Each segment's text is cut into chunks of ``CHUNK_CHARS`` characters (its last
chunk shorter), and the hash of chunk ``n`` covers every chunk up to ``n``, across segments, as
vLLM chains KV-block hashes (https://docs.vllm.ai/en/latest/design/prefix_caching.html ,
checked 2026-12-03) and as SGLang's router walks its radix tree of text (``sgl-router``, policy
``cache_aware``): two requests share their first ``n`` chunk hashes exactly when their streams
agree up to the end of chunk ``n``. So a prefix shared inside one message (a document followed
by different questions) matches to its last whole chunk, and a prefix of whole messages matches
to its last message, however short, as the segment fingerprints do.

The hashes are built from Python's own ``hash`` of each ``(position, chunk text)``: 64-bit,
salted per process (``PYTHONHASHSEED``), which is all an in-memory index needs. They are never
stored or sent.

Chunk size: 64 characters. English prompts in canonical JSON run about 4 characters per token
(cl100k), so a chunk is about 16 tokens, the KV block of vLLM and of our engine: an engine
reuses whole blocks only, so a finer chunk finds no more reusable cache, and hashing costs per
chunk. Measured (``benchmarks/proxy_routing.py --chunk-sizes``, figures in docs/benchmarks.md,
"Proxy routing", 2026-12-03): on RAG prompts of about 1,050 characters sharing a document, 64
characters leave on average 40 characters (about 10 tokens, less than a block) of the shared
prefix unmatched, and hash a request in 17 chunks, less than half the time of 16-character
chunks (66).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate, count
from operator import xor

from promptcache.fingerprint import RequestFingerprint

__all__ = [
    "CHUNK_CHARS",
    "ChunkedPrompt",
    "chunk_ends",
    "chunk_hashes",
    "chunked_prompt",
    "chunked_texts",
]

#: Characters per chunk of the prompt stream (see the module docstring for why 64).
CHUNK_CHARS = 64


def chunk_hashes(pieces: Iterable[str], size: int = CHUNK_CHARS) -> list[int]:
    """Chained hashes of ``pieces`` (segment texts, in order), each cut into ``size``-character
    chunks, its last one shorter; empty pieces add nothing.

    ``hashes[i]`` is the XOR of ``hash((j, chunk j))`` over chunks ``j <= i``: the chunk and its
    position, so equal for two streams exactly when (up to 64-bit collisions) their first
    ``i + 1`` chunks are equal. XOR-chaining keeps the whole computation in C (``map``,
    ``accumulate``), about half the time of a Python loop hashing ``(previous, chunk)``.

    Args:
        pieces: the texts; a single string is one piece.
        size: characters per chunk.

    Raises:
        ValueError: ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"chunk size must be >= 1 character, got {size}")
    if isinstance(pieces, str):
        pieces = (pieces,)
    chunks = [text[start : start + size] for text in pieces for start in range(0, len(text), size)]
    return list(accumulate(map(hash, zip(count(), chunks)), xor))


def chunk_ends(lengths: Iterable[int], size: int = CHUNK_CHARS) -> list[int]:
    """Each chunk's end offset in the concatenated pieces, for pieces of ``lengths``
    characters (the chunks ``chunk_hashes`` cuts)."""
    out: list[int] = []
    offset = 0
    for n in lengths:
        out.extend(range(offset + size, offset + n, size))
        if n:
            out.append(offset + n)
        offset += n
    return out


class ChunkedPrompt:
    """A request's chunk hashes and what a matched depth is worth.

    Args:
        hashes: ``chunk_hashes`` of the prompt stream.
        lengths: the stream's pieces' lengths (characters).
        tokens: the stream's approximate tokens (``RequestFingerprint.approx_prefix_tokens``),
            or a function that counts them, called once, the first time ``tokens`` or
            ``tokens_at`` is read (counting a new message's tokens costs more than hashing
            its chunks, and routing needs only the hashes).
        size: characters per chunk.
    """

    __slots__ = ("_count", "_ends", "_tokens", "hashes", "lengths", "size")

    def __init__(
        self,
        hashes: Sequence[int],
        lengths: Sequence[int],
        tokens: int | Callable[[], int],
        size: int = CHUNK_CHARS,
    ) -> None:
        self.hashes = hashes
        self.lengths = lengths
        self.size = size
        self._tokens: int | None = None if callable(tokens) else tokens
        self._count = tokens if callable(tokens) else None
        self._ends: list[int] = []

    @property
    def tokens(self) -> int:
        """The stream's approximate tokens (counted now if they were not yet)."""
        if self._tokens is None:
            assert self._count is not None
            self._tokens = self._count()
        return self._tokens

    def tokens_at(self, depth: int) -> int:
        """Approximate tokens of the first ``depth`` chunks: the prompt's tokens pro rata of
        their characters (0 for depth 0, ``tokens`` for every chunk)."""
        if depth <= 0 or not self.hashes:
            return 0
        if not self._ends:
            self._ends.extend(chunk_ends(self.lengths, self.size))
        ends = self._ends
        return round(self.tokens * ends[min(depth, len(ends)) - 1] / ends[-1])


def chunked_prompt(fingerprint: RequestFingerprint, size: int = CHUNK_CHARS) -> ChunkedPrompt:
    """The chunk hashes of ``fingerprint``'s prompt stream (its segments' canonical texts)."""
    texts = [segment.text for segment in fingerprint.segments]
    return ChunkedPrompt(
        chunk_hashes(texts, size), [len(t) for t in texts], fingerprint.approx_prefix_tokens, size
    )


def chunked_texts(
    texts: Sequence[str], tokens: int | Callable[[], int], size: int = CHUNK_CHARS
) -> ChunkedPrompt:
    """The chunk hashes of a prompt stream given as its segments' canonical texts
    (``PromptTexts.texts``), its tokens given or counted when first read."""
    return ChunkedPrompt(chunk_hashes(texts, size), [len(t) for t in texts], tokens, size)
