"""The kv_events policy's tokenizer and block-hash caches, against whole-prompt tokenisation.

Real tokenizers: a byte-level BPE (GPT-2 style: it never merges across a space before a word)
trained here with the ``tokenizers`` library, and tinystories' (a BPE trained without
whitespace splitting: it has tokens like ``upon▁a▁tim``, so the piece cache must refuse it).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models, pre_tokenizers, trainers

from promptcache.engine.block_manager import prefix_block_hashes
from promptcache.engine.tokenizer import Tokenizer
from promptcache.proxy.routing.kv_index import PromptHasher
from promptcache.proxy.routing.token_cache import (
    BlockHashCache,
    CachingTokenizer,
    cut_points,
    pair_cut_points,
    vocabulary_pairs,
)

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
SENTENCE = (
    "the cat sat on a mat and ran to the big red house by the river , . ! ? 12 3.5 (x) "
    "don't it's ünïcödé 中文 -- \"quoted\" snake_case CamelCase"
)
WORDS = SENTENCE.split(" ")


def _text(rng: random.Random, words: int) -> str:
    seps = [" ", " ", " ", "  ", "", "\n", "\t", " \n "]
    return "".join(rng.choice(WORDS) + rng.choice(seps) for _ in range(words))


@pytest.fixture(scope="module")
def byte_level(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint directory with a GPT-2-style byte-level BPE tokenizer."""
    folder = tmp_path_factory.mktemp("bpe")
    backend = Backend(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<s>", "</s>"],
    )  # fmt: skip
    rng = random.Random(0)
    backend.train_from_iterator([_text(rng, 50) for _ in range(300)], trainer)
    backend.save(str(folder / "tokenizer.json"))
    config = {"bos_token": "<s>", "eos_token": "</s>", "chat_template": TEMPLATE}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_cut_points_fall_on_single_spaces_about_a_chunk_apart() -> None:
    text = "aaaa bbbb cccc  dddd\neeee ffff"
    cuts = cut_points(text, size=8)
    assert cuts[-1] == len(text)
    for cut in cuts[:-1]:
        assert text[cut] == " " and text[cut - 1] != " " and text[cut + 1] != " "
    assert cuts == [4, 9, len(text)]  # the third chunk has only a double space: merged
    assert cut_points("x" * 100, size=8) == [100]


def test_cuts_continued_from_a_cut_are_the_rest_of_the_texts_cuts() -> None:
    rng = random.Random(21)
    text = _text(rng, 300)
    cuts = cut_points(text, size=16)
    follows, space = vocabulary_pairs(Tokenizer.from_pretrained(TINYSTORIES)._backend) or ({}, "")
    pairs = pair_cut_points(text, follows, space, size=16)
    assert len(cuts) > 20 and len(pairs) > 20
    for i, cut in enumerate(cuts[:-1]):
        assert cut_points(text, 16, cut) == cuts[i + 1 :]
    for i, cut in enumerate(pairs[:-1]):
        assert pair_cut_points(text, follows, space, 16, None, cut) == pairs[i + 1 :]


def test_pieces_give_exactly_the_whole_prompts_tokens(byte_level: Path) -> None:
    engine = Tokenizer.from_pretrained(byte_level)
    assert CachingTokenizer.check(engine)
    cached = CachingTokenizer(engine)
    rng = random.Random(7)
    for _ in range(200):
        text = _text(rng, rng.randint(1, 120))
        for specials in (False, True):
            assert cached.encode(text, specials) == engine.encode(text, specials)
    assert cached.enabled


def test_a_repeat_tokenises_only_its_new_tail(byte_level: Path) -> None:
    engine = Tokenizer.from_pretrained(byte_level)
    cached = CachingTokenizer(engine)
    rng = random.Random(3)
    document = _text(rng, 400).replace("  ", " ")
    cached.encode(document + " first question?", False)
    pieces = len(cut_points(document + " first question?"))
    assert cached.misses == pieces and cached.hits == 0
    repeat = document + " and another question about it?"
    assert cached.encode(repeat, False) == engine.encode(repeat, False)
    new_pieces = cached.misses - pieces
    assert 1 <= new_pieces <= 2  # the question, perhaps with the document's last words
    assert cached.hits == len(cut_points(repeat)) - new_pieces


def test_a_tokenizer_that_merges_across_spaces_is_cut_between_unpaired_characters() -> None:
    engine = Tokenizer.from_pretrained(TINYSTORIES)
    assert "upon▁a▁tim" in engine._backend.get_vocab()  # a token across two spaces
    assert not CachingTokenizer.check(engine, "space")
    assert CachingTokenizer.check(engine, "pair")
    hasher = PromptHasher(TINYSTORIES, TEMPLATE)
    assert isinstance(hasher.tokenizer, CachingTokenizer) and hasher.tokenizer.mode == "pair"
    cached = hasher.tokenizer
    rng = random.Random(9)
    for _ in range(300):
        text = _text(rng, rng.randint(1, 100))
        for specials in (False, True):
            assert cached.encode(text, specials) == engine.encode(text, specials), text
    assert cached.enabled and cached.hits > 0
    # a repeat with a new ending tokenises only its last pieces
    document = _text(rng, 300)
    cached.encode(document + " Why?", False)
    before = cached.misses
    assert cached.encode(document + " And then what?", False) == engine.encode(
        document + " And then what?", False
    )
    assert 1 <= cached.misses - before <= 2


def test_a_difference_found_at_run_time_turns_the_cache_off() -> None:
    engine = Tokenizer.from_pretrained(TINYSTORIES)  # merges across spaces
    cached = CachingTokenizer(engine, "space")  # built without the probe
    text = "Once upon a time, there was a little girl named Lily. She liked to play outside."
    assert cached.encode(text, False) == engine.encode(text, False)  # verified whole: fixed
    assert not cached.enabled


def test_block_hash_cache_matches_the_engines_chain() -> None:
    cache = BlockHashCache(max_blocks=8)
    rng = random.Random(5)
    for _ in range(30):
        tokens = [rng.randrange(50) for _ in range(rng.randint(0, 80))]
        shared = tokens[: rng.randint(0, len(tokens))] + [rng.randrange(50) for _ in range(20)]
        for ids in (tokens, shared):
            for salt in (None, "", "tenant-1"):
                assert cache.hashes(ids, 4, salt) == prefix_block_hashes(ids, 4, salt)
    assert len(cache._hashes) <= 8


def test_the_hasher_with_the_cache_gives_the_engines_hashes(byte_level: Path) -> None:
    hasher = PromptHasher(byte_level)
    assert isinstance(hasher.tokenizer, CachingTokenizer)
    rng = random.Random(11)
    document = _text(rng, 300)
    for question in ("Why?", "What did the cat do?", "Where is the red house?"):
        body = {"model": "m", "messages": [{"role": "user", "content": f"{document} {question}"}]}
        hashes = hasher.hashes("openai_chat", body, 16)
        assert hashes is not None
        text = TEMPLATE.replace("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
                                "{% endfor %}", f"user: {document} {question}\n")  # fmt: skip
        tokens = Tokenizer.from_pretrained(byte_level).encode(text, add_special_tokens=False)
        usable = tokens[: (len(tokens) - 1) // 16 * 16]
        expected = [h & (2**64 - 1) for h in prefix_block_hashes(usable, 16)]
        assert hashes[0] == expected
    assert hasher.tokenizer.hits > 0


@pytest.mark.parametrize("mode", ["space", "pair"])
def test_prompts_that_share_a_prefix_up_to_any_character_keep_the_whole_texts_tokens(
    byte_level: Path, mode: str
) -> None:
    """A prompt that starts as a recent one (the recent-prompt path) up to any character,
    including one just before or after a cut, still gets exactly the whole text's tokens."""
    engine = Tokenizer.from_pretrained(byte_level if mode == "space" else TINYSTORIES)
    cached = CachingTokenizer(engine, mode)
    rng = random.Random(13)
    document = _text(rng, 900)
    assert len(document) > 4096  # every key length of the recent prompts is reached
    cuts = cached._cuts(document, 64)
    ends = [*rng.sample(range(len(document)), 60), *(c + d for c in cuts[:20] for d in (-2, 0, 1))]
    for end in ends:
        text = document[:end] + _text(rng, rng.randint(0, 6))
        for specials in (False, True):
            assert cached.encode(text, specials) == engine.encode(text, specials), end
    assert cached.enabled


def test_block_hash_cache_on_long_prompts_that_share_a_prefix() -> None:
    cache = BlockHashCache()
    rng = random.Random(17)
    document = [rng.randrange(1000) for _ in range(2000)]
    cache.hashes([*document, 1, 2, 3], 16)
    for cut in (0, 5, 16, 17, 1023, 1024, 1999, 2000):
        for salt in (None, "tenant"):
            tokens = document[:cut] + [rng.randrange(1000) for _ in range(40)]
            assert cache.hashes(tokens, 16, salt) == prefix_block_hashes(tokens, 16, salt)
    assert cache.hashes(document, 16) == prefix_block_hashes(document, 16)


@pytest.mark.parametrize("checkpoint", ["byte_level", "tinystories"])
def test_a_repeat_takes_the_recent_prompts_hashes_and_they_are_the_engines(
    byte_level: Path, checkpoint: str
) -> None:
    """Chat and completions prompts (the latter with the tokenizer's special tokens in front),
    salted and unsalted, at several block sizes, sharing a prefix with a recent prompt up to
    any character: the hashes are the engine's chain over the whole text's tokens, and the
    blocks shared whole come from the recent prompt's chain (only the new ones are looked up)."""
    folder = byte_level if checkpoint == "byte_level" else TINYSTORIES
    hasher = PromptHasher(folder, TEMPLATE)
    engine = Tokenizer.from_pretrained(folder)
    engine.set_chat_template(TEMPLATE)
    assert isinstance(hasher.tokenizer, CachingTokenizer)
    rng = random.Random(23)
    document = _text(rng, 400)
    looked_up = 0
    for round_ in range(40):
        end = rng.randrange(len(document))
        text = document[:end] + _text(rng, rng.randint(1, 5))
        salt = rng.choice([None, "tenant-1"])
        block_size = rng.choice([4, 16, 32])
        api = rng.choice(["openai_chat", "openai_completions"])
        body: dict[str, object] = {"model": "m", "max_tokens": 1}
        if api == "openai_chat":
            body["messages"] = [{"role": "user", "content": text}]
            tokens = engine.encode(engine.apply_chat_template(body["messages"]), False)
        else:
            body["prompt"] = text
            tokens = engine.encode(text, True)
        if salt is not None:
            body["cache_salt"] = salt
        usable = tokens[: (len(tokens) - 1) // block_size * block_size]
        before = len(hasher.block_hashes._hashes)
        got = hasher.hashes(api, body, block_size)
        assert got is not None
        mask = 2**64 - 1
        assert got[0] == [h & mask for h in prefix_block_hashes(usable, block_size, salt)], round_
        assert got[1] == [h & mask for h in prefix_block_hashes(usable, block_size)], round_
        looked_up += len(hasher.block_hashes._hashes) - before
        again = hasher.hashes(api, body, block_size)  # a repeat of the same text: no new block
        assert again == got
    assert hasher.tokenizer.last_encoded is not None
    assert looked_up > 0


def test_a_completions_batch_hashes_its_first_prompt(byte_level: Path) -> None:
    """The tokenizer's latest encode is the batch's last prompt: the first prompt's hashes
    must not take it for their own."""
    hasher = PromptHasher(byte_level)
    engine = Tokenizer.from_pretrained(byte_level)
    rng = random.Random(29)
    first, second = _text(rng, 80), _text(rng, 80)
    hasher.hashes("openai_completions", {"model": "m", "prompt": second}, 16)
    got = hasher.hashes("openai_completions", {"model": "m", "prompt": [first, second]}, 16)
    tokens = engine.encode(first, True)
    usable = tokens[: (len(tokens) - 1) // 16 * 16]
    assert got is not None and got[0] == [h & (2**64 - 1) for h in prefix_block_hashes(usable, 16)]
