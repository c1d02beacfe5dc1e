"""Automatic breakpoint placement, the 4-breakpoint limit, TTL order and model minimums."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptcache.breakpoints import PlannedBreakpoint, plan_breakpoints
from promptcache.errors import (
    BreakpointLimitError,
    BreakpointTTLOrderError,
    ConfigError,
    TooManyBreakpoints,
)
from promptcache.minimums import default_model_minimums, load_model_minimums
from promptcache.prompt import PromptBuilder
from promptcache.tokens import count_tokens


def _marks(rendered: dict) -> list[str]:  # type: ignore[type-arg]
    """Paths of the blocks carrying cache_control in an Anthropic rendering."""
    out = [f"tools[{i}]" for i, t in enumerate(rendered.get("tools", [])) if "cache_control" in t]
    out += [
        f"system[{i}]" for i, b in enumerate(rendered.get("system", [])) if "cache_control" in b
    ]
    for i, message in enumerate(rendered["messages"]):
        out += [
            f"messages[{i}].content[{j}]"
            for j, block in enumerate(message["content"])
            if "cache_control" in block
        ]
    return out


def test_automatic_placement(builder: PromptBuilder) -> None:
    rendered = builder.to_anthropic()
    # tools alone (~60 tokens) are below Sonnet 4.5's 1024 minimum: skipped, with a warning
    assert _marks(rendered) == ["system[1]", "system[2]", "messages[1].content[0]"]
    assert [bp.label for bp in rendered.breakpoints] == ["frozen", "session", "history"]
    (warning,) = rendered.warnings
    assert warning.startswith("skipped cache breakpoint at tools[0] (tools): cumulative prefix")
    assert "1024 tokens (Claude Sonnet 4.5; https://platform.claude.com" in warning
    assert "checked 2026-11-30" in warning
    prefix = [bp.prefix_tokens for bp in rendered.breakpoints]
    assert prefix == sorted(prefix) and prefix[0] > 1024
    # the dynamic question is never marked
    assert "cache_control" not in rendered["messages"][-1]["content"][0]


def test_all_four_when_large_enough(builder: PromptBuilder) -> None:
    b = builder.fork()
    b.min_prefix_tokens = 10
    rendered = b.to_anthropic()
    assert _marks(rendered) == ["tools[0]", "system[1]", "system[2]", "messages[1].content[0]"]
    assert rendered.warnings == ()


def test_fifth_breakpoint_raises(builder: PromptBuilder) -> None:
    b = PromptBuilder("claude-sonnet-4-5").tool("t", "d", {"type": "object"}).system("Role.")
    b.cache_breakpoint().rules("Rules.").session("s").add_user("u").dynamic("q")
    with pytest.raises(
        TooManyBreakpoints, match=r"5 cache breakpoints requested .*system\[0\] \(marker\)"
    ):
        b.to_anthropic()
    assert TooManyBreakpoints is BreakpointLimitError
    fewer = PromptBuilder("claude-sonnet-4-5", breakpoints=("frozen", "session", "history"))
    fewer.tool("t", "d", {"type": "object"}).system("Role.").cache_breakpoint().rules("R.")
    fewer.session("s").add_user("u").dynamic("q")
    fewer.min_prefix_tokens = 1
    assert _marks(fewer.to_anthropic()) == [
        "system[0]",
        "system[1]",
        "system[2]",
        "messages[0].content[0]",
    ]


def test_marker_ttl_and_dedupe_with_auto_location() -> None:
    b = PromptBuilder("claude-sonnet-4-5", ttl={"tools": "1h", "frozen": "1h"}, min_prefix_tokens=1)
    b.tool("t", "d", {"type": "object"}).cache_breakpoint()  # same block as the "tools" location
    b.system("Role.").dynamic("q")
    rendered = b.to_anthropic()
    assert [(bp.label, bp.ttl) for bp in rendered.breakpoints] == [
        ("tools", "1h"),
        ("frozen", "1h"),
    ]
    assert rendered["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert rendered["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_a_second_marker_with_another_ttl_on_one_block_is_refused() -> None:
    # cache_breakpoint("1h") then cache_breakpoint("5m") on one block kept the last TTL without
    # a word; the same TTL again (or no ttl where it is the builder's) changes nothing
    b = PromptBuilder("claude-sonnet-4-5", min_prefix_tokens=1).system("Rules.")
    b.cache_breakpoint(ttl="1h").cache_breakpoint(ttl="1h")
    with pytest.raises(
        ConfigError,
        match=r"^cache_breakpoint\(ttl='5m'\) on the frozen block added last, which "
        r"cache_breakpoint\(ttl='1h'\) already marked: a block has one breakpoint with one "
        r"TTL, so keep one call$",
    ):
        b.cache_breakpoint(ttl="5m")
    with pytest.raises(
        ConfigError,
        match=r"^cache_breakpoint\(\) \(the builder's frozen TTL, '5m'\) on the frozen block",
    ):
        b.cache_breakpoint()
    b.knowledge("Docs.").dynamic("q")
    assert [(bp.label, bp.ttl) for bp in b.to_anthropic().breakpoints] == [
        ("marker", "1h"),
        ("frozen", "5m"),
    ]
    tools = PromptBuilder("claude-sonnet-4-5").tool("t", "d", {"type": "object"})
    tools.cache_breakpoint().cache_breakpoint(ttl="5m")
    with pytest.raises(ConfigError, match=r"^cache_breakpoint\(ttl='1h'\) on tool 't', which"):
        tools.cache_breakpoint(ttl="1h")


def test_ttl_order_1h_after_5m_raises() -> None:
    b = PromptBuilder("claude-sonnet-4-5", ttl={"session": "1h"}, min_prefix_tokens=1)
    b.system("Role.").session("s").dynamic("q")
    with pytest.raises(
        BreakpointTTLOrderError,
        match=r"system\[1\] \(session\) has ttl '1h' but comes after system\[0\] \(frozen\) "
        r"with ttl '5m'.*set 'frozen' to '1h' too",
    ):
        b.to_anthropic()
    ok = PromptBuilder("claude-sonnet-4-5", ttl={"frozen": "1h"}, min_prefix_tokens=1)
    ok.system("Role.").session("s").dynamic("q")
    assert [bp.ttl for bp in ok.to_anthropic().breakpoints] == ["1h", "5m"]
    with pytest.raises(ConfigError, match=r"ttl must be '5m' or '1h'"):
        PromptBuilder().system("x").cache_breakpoint(ttl="2h")


def test_ttl_order_ignores_skipped_5m_breakpoint() -> None:
    # tools alone are below Sonnet 4.5's 1024-token minimum: their 5m breakpoint is skipped and
    # never sent, so a 1h frozen breakpoint after it is fine (it used to raise regardless)
    builder = PromptBuilder("claude-sonnet-4-5", ttl={"frozen": "1h"})
    builder.tool("run_sql", "Run a read-only SQL query.", {"type": "object"})
    builder.system("You are a senior Python reviewer.")
    builder.rules("\n".join(f"{i}. Module {i} needs type hints and tests." for i in range(150)))
    builder.session("The user is Ada.").add_user("Hi").add_assistant("Hello").dynamic("Why?")
    anthropic = builder.to_anthropic()
    assert [(bp.label, bp.ttl) for bp in anthropic.breakpoints] == [
        ("frozen", "1h"),
        ("session", "5m"),
        ("history", "5m"),
    ]
    assert "cache_control" not in anthropic["tools"][0]
    assert anthropic["system"][1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert anthropic["system"][2]["cache_control"] == {"type": "ephemeral"}
    (warning,) = anthropic.warnings
    assert warning.startswith("skipped cache breakpoint at tools[0] (tools): cumulative prefix")
    builder.model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    bedrock = builder.to_bedrock_converse()
    point_1h = {"cachePoint": {"type": "default", "ttl": "1h"}}
    assert [b for b in bedrock["toolConfig"]["tools"] if "cachePoint" in b] == []
    assert [b for b in bedrock["system"] if "cachePoint" in b] == [
        point_1h,
        {"cachePoint": {"type": "default"}},
    ]
    assert [bp.ttl for bp in bedrock.breakpoints] == ["1h", "5m", "5m"]
    assert bedrock.warnings[0].startswith("skipped cache breakpoint at tools[0] (tools): ")
    # once the 5m tools breakpoint is placed (minimum lowered), the order is wrong again
    builder.min_prefix_tokens = 10
    with pytest.raises(
        BreakpointTTLOrderError,
        match=r"system\[1\] \(frozen\) has ttl '1h' but comes after tools\[0\] \(tools\)",
    ):
        builder.to_anthropic()


def test_unknown_model_is_not_checked_but_warned() -> None:
    b = PromptBuilder("claude-3-haiku-20240307").system("Role.").dynamic("q")
    rendered = b.to_anthropic()
    assert _marks(rendered) == ["system[0]"]
    assert rendered.warnings == (
        "no minimum cacheable prefix is known for model 'claude-3-haiku-20240307': breakpoints "
        "were not checked against one; add a row to model_minimums.toml or pass "
        "min_prefix_tokens",
    )


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-opus-5", 512),
        ("claude-opus-4-8", 1024),
        ("claude-opus-4-7", 4096),  # docs disagree (2048/4096): conservative
        ("claude-opus-4-6", 4096),
        ("claude-opus-4-5-20251101", 4096),
        ("claude-opus-4-1-20250805", 1024),
        ("claude-opus-4-20250514", 1024),
        ("claude-sonnet-4-6", 2048),  # docs disagree (1024/2048): conservative
        ("claude-sonnet-4-5-20250929", 1024),
        ("claude-sonnet-4-20250514", 1024),
        ("claude-3-7-sonnet-20250219", 1024),
        ("claude-haiku-4-5", 4096),
        ("claude-3-5-haiku-20241022", 2048),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", 1024),
        ("amazon.nova-pro-v1:0", 1000),
        ("gpt-5", 1024),
        ("gemini-2.5-flash", 2048),
        ("gemini-2.5-pro", 4096),
        ("gemini-3-pro-preview", 4096),
    ],
)
def test_bundled_minimums(model: str, minimum: int) -> None:
    row = default_model_minimums().lookup(model)
    assert row is not None and row.min_tokens == minimum
    assert row.checked == "2026-11-30" and row.source_url.startswith("https://")


@pytest.mark.parametrize(
    "model",
    [
        "gemini-2.5-flash-lite",
        "models/gemini-2.5-flash-lite",
        "gemini-2.5-flash-lite-preview-06-17",
    ],
)
def test_gemini_flash_lite_has_no_bundled_minimum(model: str) -> None:
    """Google's caching page (https://ai.google.dev/gemini-api/docs/caching , checked
    2026-12-06) lists minimums for Gemini 2.5 Flash and 2.5 Pro but none for 2.5 Flash-Lite, so
    the table gives Flash-Lite no row rather than Flash's 2,048: it is treated like any model
    missing from the table, whose short prompts are rendered without a below-minimum warning."""
    assert default_model_minimums().lookup(model) is None
    short = PromptBuilder(model).system("Role.").dynamic("q")
    assert short.to_gemini().warnings == ()
    assert short.to_openai_chat(include_cache_key=False).warnings == ()


@pytest.mark.parametrize(
    "model",
    [
        "gemini-2.5-flash",
        "models/gemini-2.5-flash",
        "gemini-2.5-flash-preview-09-2025",
        "gemini-2.5-flash-image",
        "gemini-2.5-flash-001",
    ],
)
def test_gemini_flash_ids_other_than_flash_lite_keep_the_flash_minimum(model: str) -> None:
    row = default_model_minimums().lookup(model)
    assert row is not None and row.name == "Gemini 2.5 Flash" and row.min_tokens == 2048
    (warning,) = PromptBuilder(model).system("Role.").dynamic("q").to_gemini().warnings
    assert "below the Gemini minimum of 2048 tokens (Gemini 2.5 Flash; " in warning


def test_minimum_overrides(tmp_path: Path) -> None:
    table = default_model_minimums().with_override("claude-sonnet-4-5", 50)
    row = table.lookup("claude-sonnet-4-5")
    assert row is not None and row.min_tokens == 50 and row.source_url == "user override"
    own = tmp_path / "mins.toml"
    own.write_text(
        '[[models]]\nname = "Mine"\nvendor = "user"\npatterns = ["my-*"]\nmin_tokens = 7\n'
        'source_url = "local"\nchecked = "2026-11-30"\n'
    )
    loaded = load_model_minimums(own)
    assert loaded.lookup("my-model") is not None and loaded.lookup("gpt-5") is None
    b = PromptBuilder("my-model", minimums=loaded).system("Role.").dynamic("q")
    assert b.to_anthropic().breakpoints == ()  # 2 tokens < 7
    role = "You are a careful senior reviewer of Python code."
    b = PromptBuilder("my-model", minimums=loaded).system(role).dynamic("q")
    assert b.to_anthropic().breakpoints[0].prefix_tokens == count_tokens(role) >= 7
    own.write_text('[[models]]\nname = "x"\n')
    with pytest.raises(ConfigError, match=r"lacks vendor, patterns, min_tokens"):
        load_model_minimums(own)
    own.write_text("not toml [")
    with pytest.raises(ConfigError, match=r"is not valid TOML"):
        load_model_minimums(own)
    own.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")  # valid, deeper than tomllib reads
    with pytest.raises(ConfigError, match=r"nests arrays or inline tables too deeply"):
        load_model_minimums(own)
    own.write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"is not UTF-8 text"):
        load_model_minimums(own)
    with pytest.raises(ConfigError, match=r"cannot read model minimums file"):
        load_model_minimums(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match=r"min_tokens must be a positive integer"):
        table.with_override("m", 0)
    # a model that is not a name was an AttributeError ('int' object has no attribute 'lower')
    with pytest.raises(
        ConfigError, match=r"^lookup\(model\) needs a model name \(str\), got NoneType"
    ):
        table.lookup(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^with_override\(model, ...\) needs a model name"):
        table.with_override(5, 1024)  # type: ignore[arg-type]


_MINE = (
    '[[models]]\nname = "Mine"\nvendor = "bedrock"\npatterns = ["my-*"]\nmin_tokens = 7\n'
    'source_url = "local"\nchecked = "2026-11-30"\n'
)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # a string "false" would read as true: the tools breakpoint kept where nothing caches
        ('tool_caching = "false"\n', r"tool_caching must be true or false \(no quotes\)"),
        ("tool_cachng = false\n", r"#1 has unknown key\(s\) tool_cachng; allowed: name, vendor"),
        ('lint_min_tokens = "5"\n', r"#1: lint_min_tokens must be a positive integer, got '5'"),
    ],
)  # fmt: skip
def test_own_minimums_file_refuses_typos_and_quoted_booleans(
    tmp_path: Path, extra: str, message: str
) -> None:
    own = tmp_path / "mins.toml"
    own.write_text(_MINE + extra, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_model_minimums(own)
    own.write_text("models = [1]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"#1 must be a table \(\[\[models\]\]\), got int"):
        load_model_minimums(own)
    own.write_text(_MINE + "tool_caching = false\n", encoding="utf-8")
    row = load_model_minimums(own).lookup("my-model")
    assert row is not None and row.tool_caching is False


def test_bedrock_nova_cannot_cache_tools() -> None:
    requested = [
        PlannedBreakpoint("tools", "tools", 0, "5m", 2000),
        PlannedBreakpoint("frozen", "system", 0, "5m", 3000),
    ]
    plan = plan_breakpoints(requested, model="us.amazon.nova-pro-v1:0", vendor="bedrock")
    assert [bp.label for bp in plan.kept] == ["frozen"]
    assert plan.min_tokens == 1000
    assert plan.warnings[0].startswith("skipped cache breakpoint at tools[0] (tools): Amazon Nova")
    same_on_anthropic = plan_breakpoints(requested, model="claude-sonnet-4-5", vendor="anthropic")
    assert len(same_on_anthropic.kept) == 2


def test_a_one_token_prefix_is_one_token_in_the_warning() -> None:
    rendered = PromptBuilder("claude-sonnet-4-5").system("Hi").dynamic("q").to_anthropic()
    (warning,) = rendered.warnings
    assert "cumulative prefix is about 1 token, below the minimum of 1024 tokens" in warning


def test_ttl_order_error_names_every_5m_breakpoint_before_the_1h_one() -> None:
    """It named only the first ('set frozen to 1h too'); done, the render failed again on
    session, so the fix it gave did not fix it."""

    def build(ttl: dict[str, str]) -> PromptBuilder:
        b = PromptBuilder("claude-sonnet-4-5", ttl=ttl, min_prefix_tokens=1)
        return b.system("Role.").session("s").add_user("u").add_assistant("a").dynamic("q")

    with pytest.raises(
        BreakpointTTLOrderError, match=r"set 'frozen' and 'session' to '1h' too, or 'history'"
    ):
        build({"history": "1h"}).to_anthropic()
    done = build({"history": "1h", "frozen": "1h", "session": "1h"}).to_anthropic()
    assert [bp.ttl for bp in done.breakpoints] == ["1h", "1h", "1h"]
