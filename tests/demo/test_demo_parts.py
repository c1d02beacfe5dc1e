"""The demo's parts without servers: workload plan, model choice, child-process failures."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from promptcache.demo.model import has_chat_template, resolve_model
from promptcache.demo.processes import ChildProcesses, free_port
from promptcache.demo.runner import CHAT_TEMPLATE, load_app
from promptcache.demo.summary import (
    VariantSummary,
    _ttft_sentence,
    group_break_offsets,
    word_start,
)
from promptcache.demo.workload import STORY_ARCS, plan_workload
from promptcache.errors import ConfigError, DemoError

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / ".." / "shared" / "models" / "tinystories-656k"


def test_plan_gives_every_user_the_asked_number_of_requests_in_arcs_of_four() -> None:
    plans = plan_workload(users=3, requests_per_user=10)
    assert [p.num_requests for p in plans] == [10, 10, 10]
    assert [len(c) for c in plans[0].conversations] == [4, 4, 2]
    assert len({p.child[0] for p in plans}) == 3
    # Concurrent users start different stories.
    assert len({p.conversations[0][0] for p in plans}) == 3
    assert plans[0].conversations[0][0] == STORY_ARCS[0][0].format(name=plans[0].child[0])


def test_plan_names_stay_unique_past_the_list_of_children() -> None:
    plans = plan_workload(users=20, requests_per_user=1)
    assert len({p.child[0] for p in plans}) == 20


@pytest.mark.parametrize("app_name", ["naive_app", "layered_app"])
def test_longest_request_fits_the_models_context(app_name: str) -> None:
    """The largest request of the workload (system prompt, three earlier turns with maximal
    answers, the question, room for the answer) stays under tinystories' 512 tokens, rendered
    and tokenised as the engine server does."""
    from promptcache.engine.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(MODEL)
    tokenizer.chat_templates["default"] = CHAT_TEMPLATE
    app = load_app(ROOT / "examples" / f"{app_name}.py", app_name)
    max_tokens, slack = 16, 4  # a re-tokenised answer may take a few more tokens
    longest = 0
    for plan in plan_workload(users=8, requests_per_user=24):
        story = app.StoryTime(None, "tinystories-656k", app.Child(*plan.child))
        for arc in plan.conversations:
            story.new_story()
            for turn, question in enumerate(arc):
                if app_name == "naive_app":
                    system = app.build_system_prompt(story.child)
                    messages = [{"role": "system", "content": system}, *story.history]
                    messages.append({"role": "user", "content": question})
                    story.history += [messages[-1], {"role": "assistant", "content": "."}]
                else:
                    params = story.conversation.fork().dynamic(question).to_openai_chat()
                    messages = params["messages"]
                    story.conversation.add_user(question).add_assistant(".")
                text = tokenizer.apply_chat_template(messages)
                n = len(tokenizer.encode(text, add_special_tokens=False))
                longest = max(longest, n + turn * (max_tokens + slack) + max_tokens)
    assert longest < 512, longest


def test_explicit_model_directory(tmp_path: Path) -> None:
    choice = resolve_model(str(MODEL), repo_root=tmp_path, environ={})
    assert choice.path == MODEL.resolve()
    assert choice.name == "tinystories-656k"
    assert choice.source == "--model"


def test_environment_variable_comes_after_the_option(tmp_path: Path) -> None:
    env = {"PROMPTCACHE_MODEL": str(MODEL)}
    assert resolve_model(None, repo_root=tmp_path, environ=env).source == "$PROMPTCACHE_MODEL"
    with pytest.raises(ConfigError, match="--model"):
        resolve_model(str(tmp_path / "nope"), repo_root=tmp_path, environ=env)


def test_bundled_checkpoint_beside_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    models = tmp_path / "shared" / "models" / "tinystories-656k"
    models.mkdir(parents=True)
    repo.mkdir()
    (models / "config.json").write_text("{}")
    choice = resolve_model(None, repo_root=repo, cwd=repo, environ={}, allow_download=False)
    assert choice.path == models.resolve()


def test_a_directory_that_is_not_a_checkpoint_says_how_to_give_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config\.json") as info:
        resolve_model(str(tmp_path), repo_root=tmp_path, environ={})
    assert "PROMPTCACHE_MODEL" in str(info.value)


def test_chat_template_detection(tmp_path: Path) -> None:
    assert not has_chat_template(MODEL)  # the demo then passes its own plain template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ x }}"}))
    assert has_chat_template(tmp_path)


def test_a_child_that_exits_before_it_is_healthy_is_reported_with_its_log(tmp_path: Path) -> None:
    with ChildProcesses(tmp_path) as children:
        child = children.start("short-lived", ["--version"])
        url = f"http://127.0.0.1:{free_port()}/health"
        with pytest.raises(DemoError, match="exited with status 0") as info:
            children.wait_healthy(child, url, timeout_s=60)
    assert "promptcache, version" in str(info.value)
    assert str(child.log_path) in str(info.value)
    assert children.children == []


# -- --price-as: only vendors that cache automatically with no write fee ------------------------


@pytest.mark.parametrize(
    "model",
    ["claude-sonnet-4-5", "claude-haiku-4-5", "us.anthropic.claude-sonnet-4-5-v1:0",
     "amazon.nova-pro", "gpt-5.6-sol"],
)  # fmt: skip
def test_price_as_a_breakpoint_vendor_is_refused(model: str) -> None:
    from promptcache.demo.summary import check_price_model

    with pytest.raises(ConfigError, match="breakpoints") as info:
        check_price_model(model)
    assert "gpt-5 (default)" in str(info.value)


@pytest.mark.parametrize("model", ["gpt-5", "gpt-4.1-mini", "gpt-4o", "o3", "gemini-2.5-flash"])
def test_price_as_an_automatic_caching_vendor_is_accepted(model: str) -> None:
    from promptcache.demo.summary import check_price_model

    price = check_price_model(model)
    assert price.cache_write_5m == price.input  # no write fee: nothing left unpriced


def test_demo_cli_refuses_claude_rates_before_starting_anything(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from promptcache.cli import cli

    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["demo", "--price-as", "claude-sonnet-4-5", "--output-dir", str(out)]
    )
    assert result.exit_code == 2
    assert "error: --price-as claude-sonnet-4-5" in result.output
    assert not out.exists()  # nothing was started or written


def _excerpt(text_a: str, text_b: str, offset: int) -> str:
    """The explainer's excerpt: 30 characters each side of ``offset``."""
    window = slice(max(0, offset - 30), offset + 30)
    return f"-{text_a[window]}\n+{text_b[window]}"


def test_ids_sharing_a_first_character_fall_in_one_group_and_groups_add_up() -> None:
    head = "Current time: 11:27:45. Request id: "
    at = len(head)
    # ids that differ at their first character, and ids that happen to share it
    a = _excerpt(head + "fb930e9de483.", head + "3fb2fc9e6b5b.", at)
    b = _excerpt(head + "d3c0ed622c27.", head + "de47bed8a40c.", at + 1)
    c = _excerpt(head + "dd3c0ed622c2.", head + "dd47bed8a40c.", at + 2)
    assert (word_start(at, a), word_start(at + 1, b), word_start(at + 2, c)) == (at, at, at)
    # the time's last digit: another word, its own group
    t = _excerpt("Current time: 11:27:45.", "Current time: 11:27:46.", 21)
    assert word_start(21, t) == 20
    rows = (
        [(at, a)] * 5
        + [(at + 1, b)] * 3
        + [(at + 2, c)]
        + [(21, t)] * 2
        + [(3, None), (None, None)]
    )
    examples, other = group_break_offsets(rows, limit=1)
    assert [(e.offset, e.requests) for e in examples] == [(at, 9)]
    assert other == len(rows) - 9 == 4
    examples, other = group_break_offsets(rows, limit=5)
    assert [(e.offset, e.requests) for e in examples] == [(at, 9), (20, 2), (3, 1)]
    assert sum(e.requests for e in examples) + other == len(rows)


def _variant(name: str, ttft_p50: float, hits: int) -> VariantSummary:
    return VariantSummary(
        name=name, app_path=f"{name}.py", requests=60, users=3, wall_s=1.0, prompt_tokens=100,
        cached_tokens=10, output_tokens=5, hit_rate=0.1, hit_requests=hits,
        ttft_hit_p50_ms=ttft_p50, ttft_miss_p50_ms=ttft_p50, ttft_p50_ms=ttft_p50,
        price_model="gpt-5", cost_usd=Decimal(1), cost_without_cache_usd=Decimal(2),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("layered_ms", "naive_ms", "verdict"),
    [
        (17.0, 34.0, "the layered app's first tokens came sooner"),
        (40.0, 34.0, "the layered app's first tokens came later"),
        (34.2, 33.9, "the same for both"),
    ],
)
def test_the_ttft_sentence_claims_only_what_the_medians_show(
    layered_ms: float, naive_ms: float, verdict: str
) -> None:
    text = _ttft_sentence(_variant("naive", naive_ms, 59), _variant("layered", layered_ms, 58))
    assert text is not None and verdict in text
    assert (
        f"{round(layered_ms)} ms for the layered app (60 requests, 58 of them cache hits)" in text
    )
    assert f"{round(naive_ms)} ms for the naive app (60 requests, 59 cache hits)" in text
    assert "faster" not in text and "gap grows" not in text
