"""PromptBuilder layers: ordering rules, normalisation, validation, fork."""

from __future__ import annotations

import pytest

from promptcache.errors import CanonicalizationError, ConfigError, LayerOrderError
from promptcache.prompt import PromptBuilder, RenderedRequest, Turn


@pytest.mark.parametrize("later", ["session", "dynamic", "add_user", "add_assistant"])
@pytest.mark.parametrize("frozen", ["system", "rules", "knowledge", "tool", "cache_breakpoint"])
def test_frozen_after_later_layer_raises(later: str, frozen: str) -> None:
    b = PromptBuilder("claude-sonnet-4-5").system("Role.")
    getattr(b, later)("text")
    calls = {
        "system": lambda: b.system("More."),
        "rules": lambda: b.rules("More."),
        "knowledge": lambda: b.knowledge("Doc."),
        "tool": lambda: b.tool("t", "d", {"type": "object"}),
        "cache_breakpoint": lambda: b.cache_breakpoint(),
    }
    with pytest.raises(
        LayerOrderError, match=rf"{frozen}\(\) adds frozen content, but {later}\(\)"
    ):
        calls[frozen]()


def test_example_after_session_raises() -> None:
    b = PromptBuilder().session("s")
    with pytest.raises(LayerOrderError):
        b.example("q", "a")


def test_frozen_text_is_normalised_by_default_and_switchable() -> None:
    b = PromptBuilder().system("Role.  \r\nLine two.\t").rules("r ", title="T")
    b.knowledge("doc\r\n", title='A "quoted" title').example("q ", "a\r\n")
    assert b.frozen_blocks == (
        "Role.\nLine two.",
        "## T\n\nr",
        '<document title="A &quot;quoted&quot; title">\ndoc\n\n</document>',
        "<example>\nUser: q\nAssistant: a\n\n</example>",
    )
    raw = PromptBuilder(normalize_frozen=False).system("Role.  \r\n")
    assert raw.frozen_blocks == ("Role.  \r\n",)
    # session and dynamic text is sent as given
    b.session("keep  \r\n").dynamic("keep too  ")
    assert b.session_blocks == ("keep  \r\n",) and b.dynamic_blocks == ("keep too  ",)


def test_tools_are_canonical_and_validated() -> None:
    b = PromptBuilder()
    b.tool("q", "Query.  ", {"type": "object", "required": ["b", "a"], "properties": {}})
    (tool,) = b.tools
    assert tool.description == "Query."
    assert list(tool.input_schema) == ["properties", "required", "type"]
    assert tool.input_schema["required"] == ["a", "b"]
    with pytest.raises(ConfigError, match=r"already defined"):
        b.tool("q", "again", {"type": "object"})
    with pytest.raises(ConfigError, match=r"must be 1-64 characters"):
        b.tool("bad name", "d", {"type": "object"})
    # a trailing newline passed the pattern's "$" and was sent on as the tool's name
    with pytest.raises(ConfigError, match=r"tool name 'run\\n' must be 1-64 characters"):
        b.tool("run\n", "d", {"type": "object"})
    with pytest.raises(ConfigError, match=r'"type": "object"'):
        b.tool("t2", "d", {"type": "string"})
    with pytest.raises(CanonicalizationError, match=r"is nan"):
        b.tool("t3", "d", {"type": "object", "default": float("nan")})


@pytest.mark.parametrize("value", ["", "   \n", 3])
def test_empty_or_non_text_is_rejected(value: object) -> None:
    with pytest.raises(ConfigError, match=r"system text (is empty|must be a str)"):
        PromptBuilder().system(value)  # type: ignore[arg-type]


def test_constructor_validation() -> None:
    with pytest.raises(ConfigError, match=r"breakpoints must be a sequence"):
        PromptBuilder(breakpoints=("tools", "dynamic"))
    with pytest.raises(ConfigError, match=r"ttl must be '5m' or '1h'"):
        PromptBuilder(ttl="10m")
    with pytest.raises(ConfigError, match=r"unknown locations \['dynamic'\]"):
        PromptBuilder(ttl={"dynamic": "1h"})
    with pytest.raises(ConfigError, match=r"cache_key must be a non-empty str"):
        PromptBuilder(cache_key=" ")
    with pytest.raises(ConfigError, match=r"min_prefix_tokens must be a positive int"):
        PromptBuilder(min_prefix_tokens=0)
    # a lone surrogate (a bad decode) was sent on as prompt_cache_key or model, which no UTF-8
    # request can carry; both are refused where they are given, as prompt text is
    with pytest.raises(ConfigError, match=r"cache_key holds a lone surrogate \('\\ud83d' at"):
        PromptBuilder("gpt-4o", cache_key="team-\ud83d")
    with pytest.raises(ConfigError, match=r"^model holds a lone surrogate"):
        PromptBuilder("gpt-4o-\udc80")
    with pytest.raises(ConfigError, match=r"needs frozen content before it"):
        PromptBuilder().cache_breakpoint()


def test_history_is_append_only_and_dynamic_is_resettable(builder: PromptBuilder) -> None:
    assert builder.history == (
        Turn("user", "Is this loop fine?"),
        Turn("assistant", "Use a comprehension."),
    )
    assert not hasattr(builder.history, "append")
    builder.clear_dynamic()
    assert builder.dynamic_blocks == ()
    builder.dynamic("Next question?")
    assert builder.to_anthropic()["messages"][-1]["content"][0]["text"] == "Next question?"


def test_fork_copies_and_can_drop_layers(builder: PromptBuilder) -> None:
    base = builder.fork(session=False, history=False, dynamic=False)
    assert base.session_blocks == () and base.history == () and base.dynamic_blocks == ()
    base.rules("Frozen again is fine: nothing later remains.")
    assert len(base.frozen_blocks) == len(builder.frozen_blocks) + 1
    copy = builder.fork()
    copy.add_user("only in the copy")
    assert len(copy.history) == len(builder.history) + 1
    with pytest.raises(LayerOrderError):
        copy.system("late")


def test_rendered_request_is_a_plain_dict_with_notes(builder: PromptBuilder) -> None:
    rendered = builder.to_anthropic()
    assert isinstance(rendered, RenderedRequest) and isinstance(rendered, dict)
    assert isinstance(rendered.warnings, tuple) and isinstance(rendered.breakpoints, tuple)


def test_nothing_to_answer_and_missing_model() -> None:
    b = PromptBuilder("claude-sonnet-4-5").system("Role.")
    for render in (b.to_anthropic, b.to_openai_chat, b.to_gemini, b.to_bedrock_converse):
        with pytest.raises(ConfigError, match=r"nothing to answer"):
            render()
    nomodel = PromptBuilder().dynamic("q")
    with pytest.raises(ConfigError, match=r"needs a model"):
        nomodel.to_anthropic()
    assert nomodel.to_gemini()["contents"] == [{"role": "user", "parts": [{"text": "q"}]}]


def test_approx_tokens_per_layer(builder: PromptBuilder) -> None:
    tokens = builder.approx_tokens()
    assert set(tokens) == {"tools", "frozen", "session", "history", "dynamic"}
    assert tokens["frozen"] > 1024 and 0 < tokens["dynamic"] < 20


@pytest.mark.parametrize(
    ("kept", "named"),
    [
        # the session was left out: the error named session() all the same
        ({"session": False}, "add_user"),
        ({"session": False, "history": False}, "dynamic"),
        ({"dynamic": False}, "session"),  # the look-alike: the session is still there
        ({}, "session"),
    ],
)
def test_a_fork_names_a_later_layer_it_still_holds(kept: dict[str, bool], named: str) -> None:
    b = PromptBuilder("claude-sonnet-4-5").system("Role.").session("Ada.")
    b.add_user("hi").add_assistant("hello").dynamic("Why?")
    with pytest.raises(LayerOrderError, match=rf"but {named}\(\) already added later-layer"):
        b.fork(**kept).system("late")


def test_a_fork_whose_history_starts_with_the_assistant_names_add_assistant() -> None:
    b = PromptBuilder("claude-sonnet-4-5").system("Role.").add_assistant("How can I help?")
    with pytest.raises(LayerOrderError, match=r"but add_assistant\(\) already added"):
        b.fork().rules("late")


def test_fingerprint_of_an_api_that_is_not_a_name_is_a_config_error() -> None:
    """fingerprint(api=["anthropic"]) raised TypeError: unhashable type: 'list'."""
    b = PromptBuilder("claude-sonnet-4-5").system("s").dynamic("q")
    with pytest.raises(ConfigError, match=r"fingerprint\(api=\['anthropic'\]\): use one of"):
        b.fingerprint(["anthropic"])  # type: ignore[arg-type]
