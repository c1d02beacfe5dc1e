"""Plausible misuse of the SDK raises typed errors whose message says what to change.

Each case here used to escape as an AttributeError/TypeError from deep inside the SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest

from promptcache import (
    Conversation,
    PrefixGuard,
    PromptBuilder,
    Usage,
    advise_ttl,
    cost,
    load_model_minimums,
    load_price_table,
)
from promptcache.errors import ConfigError, UsageParseError

ANTHROPIC_USAGE = {"input_tokens": 1000, "output_tokens": 100}


def test_advise_ttl_rejects_datetimes_with_a_hint() -> None:
    stamps = [datetime(2026, 11, 30, 12, m, tzinfo=timezone.utc) for m in (0, 2, 4)]
    with pytest.raises(ConfigError, match=r"timestamp\(\)"):
        advise_ttl(stamps, 10_000, "claude-sonnet-4-5")  # type: ignore[arg-type]


def test_advise_ttl_rejects_string_timestamps() -> None:
    with pytest.raises(ConfigError, match="seconds"):
        advise_ttl(["0", "60"], 10_000, "claude-sonnet-4-5")  # type: ignore[list-item]


def test_cost_of_a_raw_usage_dict_says_how_to_parse_it() -> None:
    with pytest.raises(UsageParseError, match=r"Usage\.from_api"):
        cost(ANTHROPIC_USAGE, "claude-sonnet-4-5")  # type: ignore[arg-type]


@pytest.mark.parametrize("model", [None, 5])
def test_cost_needs_a_model_name(model: object) -> None:
    with pytest.raises(ConfigError, match="model"):
        cost(Usage.from_anthropic(ANTHROPIC_USAGE), model)  # type: ignore[arg-type]


def test_builder_model_must_be_a_string() -> None:
    with pytest.raises(ConfigError, match="model"):
        PromptBuilder(5)  # type: ignore[arg-type]


def test_builder_ttl_none_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ttl"):
        PromptBuilder("claude-sonnet-4-5", ttl=None)  # type: ignore[arg-type]


def test_conversation_needs_a_builder() -> None:
    with pytest.raises(ConfigError, match="PromptBuilder"):
        Conversation("You are helpful.")  # type: ignore[arg-type]


def test_price_file_with_unknown_family_names_it(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[models."acme-1"]\nfamily = "antropic"\ninput = "2"\noutput = "8"\n')
    with pytest.raises(ConfigError, match=r"unknown family 'antropic'.*anthropic"):
        load_price_table(path)


@pytest.mark.parametrize("loader", [load_price_table, load_model_minimums])
def test_price_and_minimums_files_without_rows_are_both_refused(
    tmp_path: Path, loader: Callable[[Path], object]
) -> None:
    path = tmp_path / "empty.toml"
    path.write_text("# nothing yet\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"has no rows; a row is a \[") as info:
        loader(path)
    assert str(path) in str(info.value) and "such as" in str(info.value)


def test_canonical_json_too_deep_or_cyclic_is_a_canonicalization_error() -> None:
    from promptcache import canonical_json
    from promptcache.errors import CanonicalizationError

    deep: list[object] = []
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(CanonicalizationError, match="levels"):
        canonical_json({"a": deep})
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(CanonicalizationError, match="cycle"):
        canonical_json(cyclic)


def test_deeply_nested_raw_usage_is_a_usage_parse_error() -> None:
    deep: list[object] = []
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(UsageParseError, match="nested"):
        Usage.from_openai_chat({"prompt_tokens": 1, "completion_tokens": 1, "x": deep})


def test_first_divergence_of_request_bodies_says_to_fingerprint_them() -> None:
    from promptcache import fingerprint_request
    from promptcache.fingerprint import first_divergence

    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(TypeError, match=r"old is a dict; pass fingerprint_request\(body\)"):
        first_divergence(body, body)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="new is a dict"):
        first_divergence(fingerprint_request(body), body)  # type: ignore[arg-type]
    # None (no earlier request yet) is named as None, with what to do instead
    with pytest.raises(TypeError, match=r"old is None, not a fingerprint: .* compare only once"):
        first_divergence(None, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="new is None"):
        first_divergence(fingerprint_request(body), None)  # type: ignore[arg-type]


LONE = "a child \ud83d story"  # half of a surrogate pair, as a bad decode leaves it


@pytest.mark.parametrize(
    "add",
    [
        lambda b: b.system(LONE),
        lambda b: b.rules(LONE),
        lambda b: b.rules("Be kind.", title=LONE),
        lambda b: b.knowledge("Doc.", title=LONE),
        lambda b: b.example("Hi", LONE),
        lambda b: b.tool("lookup", LONE, {"type": "object"}),
        lambda b: b.session(LONE),
        lambda b: b.session("Ada.", title=LONE),
        lambda b: b.add_user(LONE),
        lambda b: b.add_assistant(LONE),
        lambda b: b.dynamic(LONE),
        lambda b: b.dynamic("Why?", title=LONE),
    ],
)
def test_builder_refuses_a_lone_surrogate_when_it_is_added(
    add: Callable[[PromptBuilder], object],
) -> None:
    # The OpenAI and Gemini renderings used to pass it through, and the official client then
    # failed deep inside its JSON encoder; only the Anthropic rendering refused it.
    b = PromptBuilder("gpt-4o", cache_key="team-1").system("You tell stories.")
    with pytest.raises(ConfigError, match=r"lone surrogate \('\\ud83d' at character 8\)"):
        add(b)


def test_builder_keeps_a_whole_surrogate_pair_and_other_unicode() -> None:
    text = "a child \U0001f436 story, caf\u00e9, \u4e2d\u6587"
    b = PromptBuilder("gpt-4o", cache_key="team-1").system("You tell stories.")
    b.knowledge("Doc.", title=text).session("Ada.", title=text).dynamic(text, title=text)
    params = b.to_openai_chat()
    assert params["messages"][-1]["content"] == f"## {text}\n\n{text}"
    assert f'title="{text}"' in params["messages"][0]["content"]


def test_builder_title_must_be_text() -> None:
    with pytest.raises(ConfigError, match="session title must be a str or None, got int"):
        PromptBuilder("gpt-4o").session("Ada.", title=5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        # both were AttributeErrors from inside cost(): 'dict' object has no attribute ...
        ("rates", {"input": 1}, r"cost\(rates=\.\.\.\) needs a promptcache\.ModelPrice, got"),
        ("table", {"gpt-4o": {"input": 1}}, r"cost\(table=\.\.\.\) needs a PriceTable, got dict"),
    ],
)
def test_cost_rates_and_table_of_the_wrong_type(option: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cost(Usage.from_anthropic(ANTHROPIC_USAGE), "gpt-4o", **{option: value})  # type: ignore[arg-type]


def test_cost_takes_a_model_price_and_a_loaded_table(tmp_path: Path) -> None:
    from decimal import Decimal

    from promptcache import ModelPrice

    usage = Usage.from_anthropic(ANTHROPIC_USAGE)
    row = ModelPrice(
        model="acme-1", input=Decimal(2), output=Decimal(8), cache_read=Decimal("0.2"),
        cache_write_5m=Decimal("2.5"), cache_write_1h=Decimal(4),
    )  # fmt: skip
    assert cost(usage, "acme-1", rates=row).total_usd == Decimal("0.0028")
    path = tmp_path / "prices.toml"
    path.write_text('[models."acme-1"]\nfamily = "anthropic"\ninput = "2"\noutput = "8"\n')
    assert cost(usage, "acme-1", table=load_price_table(path)).total_usd == Decimal("0.0028")


def test_toml_files_saved_with_a_byte_order_mark_load(tmp_path: Path) -> None:
    # Windows editors write UTF-8 with a BOM; it was "not valid TOML: Invalid statement (at
    # line 1, column 1)", a character the user cannot see. The JSON inputs already accepted it.
    from decimal import Decimal

    from promptcache.minimums import load_model_minimums

    prices = '[models."acme-1"]\nfamily = "anthropic"\ninput = "2"\noutput = "8"\n'
    minimums = (
        '[[models]]\nname = "Mine"\nvendor = "user"\npatterns = ["my-*"]\nmin_tokens = 7\n'
        'source_url = "local"\nchecked = "2026-11-30"\n'
    )
    for bom in (b"", b"\xef\xbb\xbf"):
        (tmp_path / "prices.toml").write_bytes(bom + prices.encode())
        (tmp_path / "mins.toml").write_bytes(bom + minimums.encode())
        usage = Usage.from_anthropic(ANTHROPIC_USAGE)
        table = load_price_table(tmp_path / "prices.toml")
        assert cost(usage, "acme-1", table=table).total_usd == Decimal("0.0028")
        row = load_model_minimums(tmp_path / "mins.toml").lookup("my-model")
        assert row is not None and row.min_tokens == 7
    # a BOM in the middle is still a character TOML refuses
    (tmp_path / "prices.toml").write_bytes(prices.encode() + b"\xef\xbb\xbf")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_price_table(tmp_path / "prices.toml")


@pytest.mark.parametrize("breakpoints", [None, 5])
def test_builder_breakpoints_that_are_not_a_sequence_say_how_to_ask_for_none(
    breakpoints: object,
) -> None:
    with pytest.raises(
        ConfigError, match=r"breakpoints must be a sequence .*\(\) for no automatic"
    ):
        PromptBuilder("claude-sonnet-4-5", breakpoints=breakpoints)  # type: ignore[arg-type]


def test_builder_breakpoints_from_a_generator_are_kept() -> None:
    builder = PromptBuilder("claude-sonnet-4-5", breakpoints=(loc for loc in ["frozen"]))
    assert builder.auto_breakpoints == ("frozen",)


def test_builder_minimums_of_the_wrong_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"minimums must be a ModelMinimums table"):
        PromptBuilder("claude-sonnet-4-5", minimums="model_minimums.toml")  # type: ignore[arg-type]


def test_builder_min_prefix_tokens_as_text_is_shown_as_text() -> None:
    with pytest.raises(ConfigError, match=r"positive int, got '2048'$"):
        PromptBuilder("claude-sonnet-4-5", min_prefix_tokens="2048")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("load", "message"),
    [
        (lambda: PrefixGuard(None), r"PrefixGuard path must be a file path"),  # type: ignore[arg-type]
        (lambda: load_price_table(None), r"load_price_table\(\) needs the path"),  # type: ignore[arg-type]
        (lambda: load_model_minimums(None), r"load_model_minimums\(\) needs the path"),  # type: ignore[arg-type]
    ],
)
def test_a_store_or_table_path_of_none_is_a_config_error(
    load: Callable[[], object], message: str
) -> None:  # os.environ.get("PRICES") when the variable is unset
    with pytest.raises(ConfigError, match=message):
        load()


@pytest.mark.parametrize(
    ("title", "said"),
    [
        ("   ", "is blank ('   '); pass title=None for no heading"),
        ("", "is blank (''); pass title=None for no heading"),
        ("Rules\nfor billing", "has a line break; a title is one line"),
        ("Rules\n", "has a line break; a title is one line"),
    ],
)
@pytest.mark.parametrize("method", ["rules", "knowledge", "session", "dynamic"])
def test_a_blank_or_multiline_title_is_refused(method: str, title: str, said: str) -> None:
    # a blank title rendered an empty heading ('##   ' above the text), a line break split the
    # heading into a heading and a stray line of body
    b = PromptBuilder("gpt-4o")
    with pytest.raises(ConfigError, match=f"{method} title") as info:
        getattr(b, method)("Text.", title=title)
    assert said in str(info.value)


def test_a_frozen_title_is_normalised_as_its_text() -> None:
    # trailing spaces in a rules title were sent as they were, so "Rules " and "Rules" gave two
    # frozen prefixes although normalize_frozen promises that invisible differences do not
    b = PromptBuilder("gpt-4o").rules("Be kind.", title="Rules  ").knowledge("Doc.", title="D ")
    assert b.frozen_blocks == ("## Rules\n\nBe kind.", '<document title="D">\nDoc.\n</document>')
    raw = PromptBuilder("gpt-4o", normalize_frozen=False).rules("Be kind.", title="Rules  ")
    assert raw.frozen_blocks == ("## Rules  \n\nBe kind.",)
