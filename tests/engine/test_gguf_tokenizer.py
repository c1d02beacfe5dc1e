"""SmolLM2's tokenizer rebuilt from its GGUF vocabulary (byte-level BPE) gives the same ids,
decoded text, special tokens and chat prompts as transformers' ``AutoTokenizer`` on the file."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from promptcache.engine import Tokenizer

_WORDS = [
    "the", "capital", "France", "Paris", "don't", "we'll", "I'M", "naïve", "Zürich", "東京",
    "привет", "مرحبا", "🙂", "👩‍💻", "🇫🇷", "x²", "α+β", "—", "…", "€100", "3.14159", "2026",
    "def", "return", "{}", "[]", "();", "->", "!=", "<=", "https://example.com/a?b=1",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<im_start>",
]  # fmt: skip
_FIXED = [
    "",
    " ",
    "   ",
    "\n",
    "\n\n\n",
    "\t\t",
    " \n \n",
    "a  b   c    d",
    "trailing   ",
    "   leading",
    "What is the capital of France?",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|><|endoftext|>",
    "text<|im_end|>more",
    "def add(a: int, b: int) -> int:\n    return a + b\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += x[i];\n}",
    'print(f"{name!r:>10}")  # comment',
    "SELECT * FROM t WHERE id = 42;",
    "1234567890 12 345 6789",
    "¡Hola! ¿Qué tal? Ça va très bien, merci.",
    "日本語のテキストと English の混在",
    "한국어 텍스트",
    "emoji 😀😃😄😁 family 👨‍👩‍👧‍👦 flags 🇯🇵🇺🇸",
    "\u200b zero width \u200d joiner \ufeff bom",
    "ﬁ ligature and Ａ fullwidth",
]


def _strings(count: int = 300) -> list[str]:
    """The fixed cases plus seeded random mixes of words, whitespace runs and raw code points."""
    rng = random.Random(16)
    out = list(_FIXED)
    spaces = [" ", "  ", "\n", "\t", " \n", "    ", "\r\n", ""]
    while len(out) < count:
        parts = []
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.15:
                parts.append(chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x2FFF)])))
            else:
                parts.append(rng.choice(_WORDS))
            parts.append(rng.choice(spaces))
        out.append("".join(parts))
    return out


@pytest.fixture(scope="module")
def ours(smollm2_gguf: Path) -> Tokenizer:
    return Tokenizer.from_pretrained(smollm2_gguf)


def test_ids_and_text_match_transformers(ours: Tokenizer, hf_smollm2_tokenizer: Any) -> None:
    ref = hf_smollm2_tokenizer
    strings = _strings()
    assert len(strings) == 300
    for text in strings:
        for special in (True, False):
            expected = list(ref(text, add_special_tokens=special)["input_ids"])
            assert ours.encode(text, add_special_tokens=special) == expected, (text, special)
        ids = ours.encode(text)
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == ref.decode(
                ids, skip_special_tokens=skip
            ), text


def test_special_tokens_match_transformers(ours: Tokenizer, hf_smollm2_tokenizer: Any) -> None:
    ref = hf_smollm2_tokenizer
    assert ours.special_tokens == {
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
        "unk_token": "<|endoftext|>",
        "pad_token": "<|im_end|>",
    }
    for name, token in ours.special_tokens.items():
        assert getattr(ref, name) == token
    assert (ours.bos_token_id, ours.eos_token_id) == (ref.bos_token_id, ref.eos_token_id) == (1, 2)
    assert ours.vocab_size == len(ref) == 49152
    assert ours.encode("<|im_start|>") == [1]  # a control token stays whole
    assert ours.encode("hi", add_special_tokens=True) == ours.encode("hi", add_special_tokens=False)


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "What is the capital of France?"}],
        [
            {"role": "system", "content": "You answer in one word."},
            {"role": "user", "content": "Capital of Italy?"},
            {"role": "assistant", "content": "Rome."},
            {"role": "user", "content": "And Spain? 🇪🇸"},
        ],
        [{"role": "user", "content": "  spaces\n\nand lines  "}],
    ],
)
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_renders_like_transformers(
    ours: Tokenizer,
    hf_smollm2_tokenizer: Any,
    messages: list[dict[str, str]],
    add_generation_prompt: bool,
) -> None:
    rendered = ours.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    expected = hf_smollm2_tokenizer.apply_chat_template(
        messages, add_generation_prompt=add_generation_prompt, tokenize=False
    )
    assert rendered == expected
    assert rendered.startswith("<|im_start|>system\n")
