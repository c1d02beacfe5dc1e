"""Tokenise a repeat prompt by its new tail only: the ``kv_events`` policy's tokenizer cache.

The ``kv_events`` policy tokenises every request as the engine would (``kv_index.PromptHasher``),
which costs the tokenizer's time on the whole prompt, most of the policy's time. Prompts repeat
their prefixes, so `CachingTokenizer` cuts the text into pieces where no token can span the
cut (below), about one piece per 64-character chunk (the ``prefix`` policy's chunks,
``chunks.py``), keeps each piece's tokens in a bounded LRU map keyed by the piece's text, and
tokenises only the pieces it has not seen: a repeat pays for its new tail.

Exact only where no token can span a cut, so that the text's tokens are its pieces' tokens
end to end. Two ways to cut (``mode``):

- ``"space"``: at a single space with a non-space on each side, the piece after it starting
  with the space. Meant for BPEs whose pre-tokenizer splits before a space and a word (GPT-2
  style byte-level BPEs; the tests train one) and SentencePiece BPEs whose vocabulary holds
  ``▁`` only at the start of an entry; the probe below decides.
- ``"pair"``: between two characters that appear next to each other in no vocabulary entry
  (spaces read as the Metaspace ``▁``). BPE builds every token from vocabulary entries, so no
  token can span such a cut; this covers BPEs trained without whitespace splitting, like
  tinystories' (its vocabulary holds ``upon▁a▁tim``). A piece after the first is tokenised
  behind the character before it, whose tokens are then dropped, so a Metaspace ``▁`` is
  prepended only where the whole text gets it.

`CachingTokenizer.for_tokenizer` probes both on texts with spaces, punctuation, digits,
newlines and non-ASCII letters and keeps the first whose pieces agree with whole-text
tokenisation on every probe; with neither the policy tokenises whole prompts. At run time the
first 8 prompts and one in 1,024 after are also tokenised whole and compared, and the first
difference turns the cache off (logged once). A whole-prompt tokenisation costs about 60 times
a cached repeat (a 1,054-token prompt, ``benchmarks/proxy_kv_events.py``), so checking one in
64 cost about as much as the cached routing itself; one in 1,024 costs a few percent.

Block hashes of the engine's chain (``prefix_block_hashes``: one SHA-256 per 16-token block)
are cached too (`BlockHashCache`, keyed by the parent hash and the block's tokens), so a repeat
hashes only its new blocks.

The tokenizer cache also keeps its recent prompts (``RECENT_PROMPTS`` under each of
``RECENT_KEYS``' lengths of leading text): a repeat takes the tokens of the pieces it shares
with the latest prompt that starts as it does in one slice, found by comparing the two texts
(`common_prefix`), and looks up only its tail piece by piece.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple

from promptcache.engine.block_manager import NONE_HASH, hash_block_tokens

from .chunks import CHUNK_CHARS

__all__ = ["BlockHashCache", "CachingTokenizer", "Encoded", "RecentPrompt"]

logger = logging.getLogger(__name__)

#: Texts `CachingTokenizer.check` tokenises whole and in pieces (they must agree).
PROBES = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside.",
    "user: What is 2 + 2? Answer:  four,\tor 4 -- maybe (IV); 'quoted' \"text\" here.\n\nNext",
    "Ünïcödé wörds, 中文 字 and émojis 🙂 mixed in; a_b snake_case, CamelCase, x=1.5e-3 !",
    " leading space, trailing space ",
    "system: You are helpful.\nuser: hi\nassistant: hello there\nuser: more please\nassistant:",
)
#: Cut searches remembered (``pair_cut_points``'s ``memo``); cleared when full.
MEMO_SIZE = 100_000
#: Prompts tokenised whole and compared at first; after that one in ``VERIFY_EVERY``.
VERIFY_FIRST = 8
VERIFY_EVERY = 1024
#: Lengths of the leading text (characters) under which recent prompts are found again,
#: longest first: a repeat finds the latest prompt that starts with the same text at the
#: longest of these its length allows.
RECENT_KEYS = (4096, 1024, 256)
#: Recent prompts kept under each key length (LRU): their text, cuts and tokens.
RECENT_PROMPTS = 64
#: ``external_block_hash(h) == h & _EXTERNAL_MASK``: the published form is the low 64 bits.
_EXTERNAL_MASK = (1 << 64) - 1


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (binary search over slice
    comparisons, each a C loop)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    hi -= 1
    while lo < hi:  # a[:lo] == b[:lo] and a[:hi + 1] != b[:hi + 1]
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class RecentPrompt:
    """A recent text `CachingTokenizer` tokenised: its cuts, the token count after each piece,
    its tokens (no special tokens), and the block-hash chains computed on them
    (`kv_index.PromptHasher`: (block size, cache salt, special tokens added) -> (full hashes,
    published hashes))."""

    __slots__ = ("chains", "counts", "cuts", "ids", "text")

    def __init__(self, text: str, cuts: list[int], counts: list[int], ids: list[int]) -> None:
        self.text = text
        self.cuts = cuts
        self.counts = counts
        self.ids = ids
        self.chains: dict[tuple[int, str | None, bool], tuple[list[int], list[int]]] = {}


class Encoded(NamedTuple):
    """What one ``CachingTokenizer.encode`` call returned and what it shares with a recent text.

    Attributes:
        tokens: the list ``encode`` returned (compare by identity).
        specials: ``add_special_tokens`` as passed.
        prompt: the text's own recent entry.
        prior: the recent text it was tokenised against (None: none shared a piece).
        shared: leading ``tokens`` equal to ``prior``'s tokens encoded with the same
            ``add_special_tokens`` (a count; the special tokens in front count).
    """

    tokens: list[int]
    specials: bool
    prompt: RecentPrompt
    prior: RecentPrompt | None
    shared: int


class _Recent:
    """Recent prompts keyed by their leading ``RECENT_KEYS`` characters (an LRU map per
    length, ``RECENT_PROMPTS`` each)."""

    def __init__(self) -> None:
        self._maps: list[OrderedDict[Any, Any]] = [OrderedDict() for _ in RECENT_KEYS]

    def keys(self, key: Any, text: str) -> list[tuple[int, Any]]:
        """(key length's index, map key) for each key length ``text`` reaches."""
        return [(i, (key, text[:n])) for i, n in enumerate(RECENT_KEYS) if len(text) >= n]

    def find(self, keys: list[tuple[int, Any]]) -> Any:
        """The latest entry added under these ``keys``, at the longest length."""
        for i, at in keys:
            entry = self._maps[i].get(at)
            if entry is not None:
                return entry
        return None

    def add(self, keys: list[tuple[int, Any]], entry: Any) -> None:
        """Keep ``entry`` under each of ``keys``."""
        for i, at in keys:
            recent = self._maps[i]
            recent[at] = entry
            recent.move_to_end(at)
            if len(recent) > RECENT_PROMPTS:
                recent.popitem(last=False)


def cut_points(text: str, size: int = CHUNK_CHARS, start: int = 0) -> list[int]:
    """Where ``text`` is cut into pieces in ``"space"`` mode: for each ``size``-character chunk
    end, the last single space (a non-space on each side) at or before it and after the
    previous cut; a chunk with no such space is merged with the next. Returns the cut offsets,
    ``len(text)`` last.

    ``start``: a cut of ``text`` (as this function returns it) to continue from; only the cuts
    after it are returned. A cut lies after the chunk end before the one that made it (that end
    found none), so the next chunk end is ``_next_end(start, size)``. The search for a chunk
    end reads ``text`` up to one character past it, and ``len(text)`` only there.
    """
    cuts: list[int] = []
    last = start
    n = len(text)
    for end in range(_next_end(start, size), n, size):
        at = text.rfind(" ", last + 1, end + 1)
        while at > last and (text[at - 1].isspace() or at + 1 >= n or text[at + 1].isspace()):
            at = text.rfind(" ", last + 1, at)
        if at > last:
            cuts.append(at)
            last = at
    cuts.append(n)
    return cuts


def _next_end(cut: int, size: int) -> int:
    """The chunk end after the one that made ``cut`` (``size`` for the text's start)."""
    return -(-cut // size) * size + size


def pair_cut_points(
    text: str,
    follows: dict[str, frozenset[str]],
    space: str,
    size: int = CHUNK_CHARS,
    memo: dict[str, int] | None = None,
    start: int = 0,
) -> list[int]:
    """Where ``text`` is cut into pieces in ``"pair"`` mode: for each ``size``-character chunk
    end, the last offset ``i`` at or before it (after the previous cut) such that
    ``text[i]`` never follows ``text[i - 1]`` inside a vocabulary entry (``follows``; spaces
    read as ``space``), both characters in the vocabulary (a character outside it may be
    dropped, joining its neighbours). Returns the cut offsets, ``len(text)`` last.

    ``memo``, when given, keeps each search's answer keyed by the text it read (from the
    previous cut to the chunk end): a repeat text scans nothing it has scanned before.
    ``start`` as for `cut_points` (a search reads ``text`` up to its chunk end).
    """
    cuts: list[int] = []
    last = start
    n = len(text)
    for end in range(_next_end(start, size), n, size):
        if memo is not None:
            window = text[last : end + 1]
            found = memo.get(window)
            if found is not None:
                if found:
                    last += found
                    cuts.append(last)
                continue
        start = last
        i = end
        while i > last:
            a, b = text[i - 1], text[i]
            if a == " ":
                a = space
            if b == " ":
                b = space
            after = follows.get(a)
            if after is not None and b not in after and b in follows:
                cuts.append(i)
                last = i
                break
            i -= 1
        if memo is not None:
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            memo[window] = last - start
    cuts.append(n)
    return cuts


def vocabulary_pairs(backend: Any) -> tuple[dict[str, frozenset[str]], str] | None:
    """(character -> the characters that follow it in some vocabulary entry, every character
    of the vocabulary a key; the Metaspace replacement for a space) of a BPE ``tokenizers``
    backend; None for other models."""
    import json

    spec = json.loads(backend.to_str())
    if spec.get("model", {}).get("type") != "BPE":
        return None
    pre = spec.get("pre_tokenizer") or {}
    space = pre.get("replacement", " ") if pre.get("type") == "Metaspace" else " "
    follows: dict[str, set[str]] = {}
    entries = list(backend.get_vocab()) + [t["content"] for t in spec.get("added_tokens", [])]
    for entry in entries:
        for a in entry:
            follows.setdefault(a, set())
        for a, b in itertools.pairwise(entry):
            follows[a].add(b)
    return {a: frozenset(b) for a, b in follows.items()}, space


class CachingTokenizer:
    """The engine's ``Tokenizer`` with a piece cache in front of ``encode`` (module docstring).

    Args:
        tokenizer: a ``promptcache.engine.tokenizer.Tokenizer``; every other attribute is read
            from it.
        mode: ``"space"`` or ``"pair"``: where texts are cut (module docstring).
        max_pieces: pieces whose tokens are kept (LRU); about 64 characters each.

    Attributes:
        enabled: False once a verification found a difference (then ``encode`` is the
            tokenizer's own).
        hits, misses: pieces found in the cache and pieces tokenised (counts).

    Raises:
        ValueError: ``mode`` is ``"pair"`` and the tokenizer is not a BPE.
    """

    def __init__(self, tokenizer: Any, mode: str = "space", max_pieces: int = 50_000) -> None:
        self.tokenizer = tokenizer
        self.mode = mode
        self.max_pieces = max_pieces
        self.enabled = True
        self.hits = 0
        self.misses = 0
        self._calls = 0
        self._backend = tokenizer._backend  # the tokenizers.Tokenizer: batched encodes
        self._pairs = vocabulary_pairs(self._backend) if mode == "pair" else None
        if mode == "pair" and self._pairs is None:
            raise ValueError("pair mode needs a BPE tokenizer")
        self._pieces: OrderedDict[tuple[bool, str], list[int]] = OrderedDict()
        self._memo: dict[str, int] = {}
        self._behind: dict[str, int] = {}  # a character -> how many tokens it makes alone
        self._specials = self._special_tokens()
        #: recent texts: `RecentPrompt` entries
        self._recent = _Recent()
        #: the latest ``encode``'s `Encoded` (None before the first, or when it was tokenised
        #: whole): lets `kv_index.PromptHasher` take a recent prompt's block hashes
        self.last_encoded: Encoded | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)

    @classmethod
    def for_tokenizer(cls, tokenizer: Any) -> CachingTokenizer | None:
        """A cache for ``tokenizer`` in the first mode whose pieces agree with whole-text
        tokenisation on every probe, or None."""
        for mode in ("space", "pair"):
            if cls.check(tokenizer, mode):
                return cls(tokenizer, mode)
        return None

    @classmethod
    def check(cls, tokenizer: Any, mode: str = "space") -> bool:
        """Whether cutting in ``mode`` keeps ``tokenizer``'s tokens (every probe agrees)."""
        try:
            probe = cls(tokenizer, mode)
            for text in PROBES:
                for specials in (False, True):
                    whole = tokenizer.encode(text, add_special_tokens=specials)
                    if probe._encode_pieces(text, specials, size=8)[0] != whole:
                        return False
        except Exception:  # a tokenizer this cannot drive: tokenise whole prompts
            logger.debug("tokenizer probe failed", exc_info=True)
            return False
        return probe._specials is not None

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``, as ``tokenizer.encode`` gives them (see the module docstring)."""
        if not self.enabled or not isinstance(text, str):
            self.last_encoded = None
            return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))
        ids, self.last_encoded = self._encode_pieces(text, add_special_tokens)
        self._calls += 1
        if self._calls <= VERIFY_FIRST or self._calls % VERIFY_EVERY == 0:
            whole = list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))
            if whole != ids:
                self.enabled = False
                self.last_encoded = None
                self._pieces.clear()
                self._recent = _Recent()
                logger.warning(
                    "kv_events: the tokenizer merges across the cuts on some prompts; the proxy "
                    "now tokenises every prompt whole (slower, still exact)"
                )
                return whole
        return ids

    def _special_tokens(self) -> tuple[list[int], list[int]] | None:
        """(leading, trailing) ids ``add_special_tokens`` adds around any text, or None when
        they are not a fixed frame."""
        plain = list(self.tokenizer.encode("a b", add_special_tokens=False))
        full = list(self.tokenizer.encode("a b", add_special_tokens=True))
        for lead in range(len(full) - len(plain) + 1):
            if full[lead : lead + len(plain)] == plain:
                return full[:lead], full[lead + len(plain) :]
        return None

    def _cuts(self, text: str, size: int, start: int = 0) -> list[int]:
        if self._pairs is None:
            return cut_points(text, size, start)
        follows, space = self._pairs
        return pair_cut_points(text, follows, space, size, self._memo, start)

    def _encode_pieces(
        self, text: str, specials: bool, size: int = CHUNK_CHARS
    ) -> tuple[list[int], Encoded | None]:
        """The text's tokens: those of a recent text's pieces up to the last cut both texts
        share (the cuts whose chunk end lies two characters or more before the first character
        in which they differ are the same: `cut_points`), then the rest piece by piece; and
        what it shares with that recent text (None when tokenised whole)."""
        if specials and self._specials is None:
            return list(self.tokenizer.encode(text, add_special_tokens=True)), None
        cache = self._pieces
        start = 0
        head_cuts: list[int] = []
        head: list[int] = []
        recent_keys = self._recent.keys(size, text)
        prior: RecentPrompt | None = self._recent.find(recent_keys)
        kept = 0
        if prior is not None:
            old_cuts, old_counts = prior.cuts, prior.counts
            kept = bisect.bisect_right(
                old_cuts, (common_prefix(prior.text, text) - 2) // size * size
            )
            if kept:
                head_cuts = old_cuts[:kept]
                head = prior.ids[: old_counts[kept - 1]]
                start = head_cuts[-1]
        shared = len(head)
        cuts = self._cuts(text, size, start)
        missing: list[tuple[int, int, tuple[bool, str]]] = []  # (part, start, key)
        parts: list[list[int] | None] = []
        for cut in cuts:
            key = (start == 0, text[start:cut])
            tokens = cache.get(key)
            if tokens is None:
                missing.append((len(parts), start, key))
            else:
                cache.move_to_end(key)
            parts.append(tokens)
            start = cut
        if missing:
            self._fill(text, missing, parts)
        self.hits += len(head_cuts) + len(parts) - len(missing)
        self.misses += len(missing)
        ids = head
        counts = old_counts[: len(head_cuts)] if head_cuts else []
        for tokens in parts:
            ids += tokens or ()
            counts.append(len(ids))
        entry = RecentPrompt(text, head_cuts + cuts, counts, ids)
        self._recent.add(recent_keys, entry)
        if specials and self._specials is not None:
            lead, trail = self._specials
            out = [*lead, *ids, *trail]
            shared += len(lead)
        else:
            out = list(ids)  # the kept list stays the cache's
        return out, Encoded(out, specials, entry, prior if kept else None, shared)

    def _fill(
        self,
        text: str,
        missing: list[tuple[int, int, tuple[bool, str]]],
        parts: list[list[int] | None],
    ) -> None:
        """Tokenise the missing pieces and cache them (one call each: ``encode_batch`` hands
        a few short texts to a thread pool, slower here). In pair mode a piece after the first
        goes behind the character before it, whose tokens are dropped."""
        encode = self._backend.encode
        cache = self._pieces
        for i, start, key in missing:
            first, piece = key
            if first or self._pairs is None:
                tokens = encode(piece, add_special_tokens=False).ids
            else:
                before = text[start - 1]
                behind = self._behind.get(before)
                if behind is None:
                    behind = self._behind[before] = len(encode(before, add_special_tokens=False))
                tokens = encode(before + piece, add_special_tokens=False).ids[behind:]
            parts[i] = cache[key] = list(tokens)
        while len(cache) > self.max_pieces:
            cache.popitem(last=False)


class BlockHashCache:
    """``prefix_block_hashes`` with each block's hash kept, keyed by (parent hash, tokens).

    `extend` continues a chain whose first hashes are known (a recent prompt's, for the blocks
    a repeat shares with it: `kv_index.PromptHasher`), so a repeat looks up only its new blocks.

    Args:
        max_blocks: hashes kept; past it the oldest added go first (a plain dict in insertion
            order: no per-hit reordering, so a hit costs one tuple and one lookup).
    """

    def __init__(self, max_blocks: int = 100_000) -> None:
        self.max_blocks = max_blocks
        self._hashes: dict[tuple[int, tuple[int, ...], str | None], int] = {}

    def hashes(
        self, token_ids: Sequence[int], block_size: int, cache_salt: str | None = None
    ) -> list[int]:
        """The same list as ``prefix_block_hashes(token_ids, block_size, cache_salt)``."""
        full: list[int] = []
        self.extend(token_ids, block_size, cache_salt, len(token_ids) // block_size, full, [])
        return full

    def extend(
        self,
        token_ids: Sequence[int],
        block_size: int,
        cache_salt: str | None,
        count: int,
        full: list[int],
        published: list[int],
    ) -> None:
        """Append to ``full`` the hashes of ``prefix_block_hashes(token_ids, block_size,
        cache_salt)`` from block ``len(full)`` up to block ``count`` (exclusive), and their
        published form (`external_block_hash`: the low 64 bits) to ``published``.

        ``full`` must hold that chain's first hashes (and ``published`` their published form).
        """
        cache = self._hashes
        get = cache.get
        mask = _EXTERNAL_MASK
        parent = full[-1] if full else NONE_HASH
        for start in range(len(full) * block_size, count * block_size, block_size):
            block = tuple(token_ids[start : start + block_size])
            salt = cache_salt if start == 0 else None
            key = (parent, block, salt)
            h = get(key)
            if h is None:
                h = cache[key] = hash_block_tokens(parent, block, () if salt is None else (salt,))
            full.append(h)
            published.append(h & mask)
            parent = h
        if len(cache) > self.max_blocks:  # least recently added first: a repeat re-adds
            for key in list(itertools.islice(cache, len(cache) - self.max_blocks)):
                del cache[key]
