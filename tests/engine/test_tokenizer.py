"""Our tokenizer encodes, decodes and renders chat templates exactly like transformers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jinja2
import pytest

from promptcache.engine import Tokenizer
from promptcache.errors import InvalidRequestError, ModelLoadError

TEXTS = [
    "Once upon a time",
    "  two leading spaces",
    "a\n\nb  c\t d é ✓",
    "<|end_story|>x<|start_story|>",
    "The end.<|end_story|>",
    "",
    " ",
    "\n hi",
    "It's 3:45, isn't it? \"Yes!\"",
]

CONVERSATIONS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "Hi there!"}],
    [
        {"role": "system", "content": "You tell short stories."},
        {"role": "user", "content": "A story about a cat, please."},
    ],
    [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "  Hi! How can I help?  ", "tool_calls": None},
        {"role": "user", "content": "Tell me a joke."},
    ],
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city <b>now</b>",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def test_encode_and_decode_match_transformers(tinystories_dir: Path) -> None:
    from transformers import AutoTokenizer

    ours = Tokenizer.from_pretrained(tinystories_dir)
    theirs = AutoTokenizer.from_pretrained(tinystories_dir)
    for text in TEXTS:
        for special in (True, False):
            ids = ours.encode(text, add_special_tokens=special)
            assert ids == theirs.encode(text, add_special_tokens=special), text
        ids = [*theirs.encode(text), 5, 6, 7, 2]
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True), text
        assert ours.decode(ids, skip_special_tokens=False) == theirs.decode(ids), text
    assert ours.bos_token_id == theirs.bos_token_id == 1
    assert ours.eos_token_id == theirs.eos_token_id == 2


@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral"])
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_renders_like_transformers(
    tiny_checkpoint: Any, arch: str, add_generation_prompt: bool
) -> None:
    from transformers import AutoTokenizer

    model_dir = tiny_checkpoint(arch)
    ours = Tokenizer.from_pretrained(model_dir)
    theirs = AutoTokenizer.from_pretrained(model_dir)
    for messages in CONVERSATIONS:
        if arch == "mistral" and add_generation_prompt is False and messages[-1]["role"] != "user":
            continue
        expected = theirs.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        got = ours.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
        assert got == expected


def test_tools_pick_the_tool_use_template_and_render_json_like_transformers(
    tiny_checkpoint: Any,
) -> None:
    from transformers import AutoTokenizer

    model_dir = tiny_checkpoint("qwen2")
    ours = Tokenizer.from_pretrained(model_dir)
    theirs = AutoTokenizer.from_pretrained(model_dir)
    messages = CONVERSATIONS[1]
    expected = theirs.apply_chat_template(
        messages, tools=TOOLS, tokenize=False, add_generation_prompt=True
    )
    got = ours.apply_chat_template(messages, tools=TOOLS)
    assert got == expected
    assert "<b>now</b>" in got  # tojson does not HTML-escape
    assert "a tool user" not in got  # system message given: the tool_use default text is unused
    without_system = ours.apply_chat_template(CONVERSATIONS[0], tools=TOOLS)
    assert "You are a tool user." in without_system  # the tool_use template was chosen


def test_template_errors_become_invalid_request_errors(tiny_checkpoint: Any) -> None:
    from transformers import AutoTokenizer

    model_dir = tiny_checkpoint("mistral")
    bad = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(jinja2.exceptions.TemplateError, match="alternate"):
        AutoTokenizer.from_pretrained(model_dir).apply_chat_template(bad, tokenize=False)
    with pytest.raises(InvalidRequestError, match="roles must alternate"):
        Tokenizer.from_pretrained(model_dir).apply_chat_template(bad)
    with pytest.raises(InvalidRequestError, match="at least one message"):
        Tokenizer.from_pretrained(model_dir).apply_chat_template([])


def test_model_without_chat_template_says_so_until_one_is_set(tinystories_dir: Path) -> None:
    tokenizer = Tokenizer.from_pretrained(tinystories_dir)
    with pytest.raises(InvalidRequestError, match="no chat template"):
        tokenizer.apply_chat_template(CONVERSATIONS[0])
    tokenizer.set_chat_template(
        "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    assert tokenizer.apply_chat_template(CONVERSATIONS[0]) == (
        "<|start_story|>user: Hi there!\nassistant:"
    )
    with pytest.raises(ModelLoadError, match="does not compile"):
        tokenizer.set_chat_template("{% if %}")


def test_broken_template_or_missing_tokenizer_fails_at_load(
    tinystories_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(ModelLoadError, match=r"tokenizer\.json"):
        Tokenizer.from_pretrained(tmp_path)
    shutil.copy(tinystories_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    config = json.loads((tinystories_dir / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for m in messages %}{{ m.content }"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="chat template does not compile"):
        Tokenizer.from_pretrained(tmp_path)
