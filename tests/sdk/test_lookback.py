"""promptcache.lookback: block positions, the 20-position reach, sliding breakpoints."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from promptcache import PromptBuilder
from promptcache.errors import BreakpointTTLOrderError, ConfigError, RequestShapeError
from promptcache.fingerprint import fingerprint_request
from promptcache.lookback import (
    ANTHROPIC_LOOKBACK,
    SlidingWindow,
    block_positions,
    breakpoint_position,
    check_lookback,
    lookback_applies,
    single_block_edit,
)

MODEL = "claude-sonnet-4-5"
EPHEMERAL = {"type": "ephemeral"}


def text(t: str, mark: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": t}
    if mark:
        block["cache_control"] = EPHEMERAL
    return block


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": MODEL, "system": [text("system prompt")], "messages": messages}


def test_tool_runs_share_one_position_across_messages() -> None:
    messages = [
        {"role": "user", "content": "question"},
        {
            "role": "assistant",
            "content": [
                text("let me look"),
                {"type": "tool_use", "id": "a", "name": "t", "input": {}},
                {"type": "tool_use", "id": "b", "name": "t", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                {"type": "tool_result", "tool_use_id": "b", "content": "2"},
                text("and then"),
            ],
        },
    ]
    fp = fingerprint_request(body(messages), "anthropic")
    # system 0, question 1, text 2, tool run (2 uses + 2 results) 3, text 4
    assert block_positions(fp) == [[0], [1], [2, 3, 3], [3, 3, 4]]


def test_bedrock_cache_point_closes_the_block_before_it() -> None:
    request = {
        "modelId": "anthropic.claude-sonnet-4-5",
        "system": [{"text": "sys"}, {"cachePoint": {"type": "default"}}],
        "messages": [
            {
                "role": "user",
                "content": [{"text": "a"}, {"cachePoint": {"type": "default"}}, {"text": "b"}],
            },
            {
                "role": "assistant",
                "content": [{"text": "c"}, {"text": "d"}, {"cachePoint": {"type": "default"}}],
            },
        ],
    }
    fp = fingerprint_request(request, "bedrock_converse")
    positions = block_positions(fp)
    assert positions == [[0], [1, 2], [3, 4]]
    found = [breakpoint_position(bp, fp.breakpoints, positions, fp.api) for bp in fp.breakpoints]
    assert found == [0, 1, 4]


def test_lookback_applies_to_anthropic_and_claude_on_bedrock_only() -> None:
    assert lookback_applies("anthropic", None)
    assert lookback_applies("bedrock_converse", "us.anthropic.claude-opus-4-1-v1:0")
    assert not lookback_applies("bedrock_converse", "amazon.nova-pro-v1:0")
    assert not lookback_applies("openai_chat", "gpt-5")


def grown(appended: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request with its tail marked, and the next one ``appended`` text blocks later."""
    first = [{"role": "user", "content": [text("q", mark=True)]}]
    later = copy.deepcopy(first)
    del later[0]["content"][0]["cache_control"]
    blocks = [text(f"block {i}") for i in range(appended)]
    blocks[-1]["cache_control"] = EPHEMERAL
    later.append({"role": "assistant", "content": blocks})
    return body(first), body(later)


@pytest.mark.parametrize(("appended", "exceeded"), [(19, False), (20, False), (21, True)])
def test_reach_is_twenty_positions(appended: int, exceeded: bool) -> None:
    old, new = grown(appended)
    found = check_lookback(fingerprint_request(old), fingerprint_request(new))
    if not exceeded:
        assert found is None
        return
    assert found is not None
    verdict, write_path = found
    assert (verdict.reason, verdict.distance, write_path) == (
        "lookback_exceeded",
        21,
        "messages[0].content[0]",
    )
    assert verdict.describe(write_path).startswith("21 block positions appended")
    assert verdict.rule is ANTHROPIC_LOOKBACK


def test_a_breakpoint_before_the_last_write_is_moved() -> None:
    old, new = grown(5)
    new_moved = copy.deepcopy(new)
    del new_moved["messages"][1]["content"][-1]["cache_control"]
    new_moved["system"][0]["cache_control"] = EPHEMERAL
    found = check_lookback(fingerprint_request(old), fingerprint_request(new_moved))
    assert found is not None
    assert (found[0].reason, found[0].distance) == ("breakpoint_moved", 1)


def test_single_block_edit_is_the_anchor_shape() -> None:
    a = '{"content":[{"text":"x","type":"text"}],"role":"user"}'
    b = '{"content":[{"text":"x","type":"text"},{"text":" ","type":"text"}],"role":"user"}'
    c = '{"content":[{"text":"y","type":"text"},{"text":" ","type":"text"}],"role":"user"}'
    assert single_block_edit(a, b) and single_block_edit(b, a)
    assert not single_block_edit(a, c)  # text changed too
    assert not single_block_edit(a, a)


def test_sliding_window_rejects_a_window_past_the_rule() -> None:
    with pytest.raises(ValueError, match=r"slide_after must be in 1\.\.20"):
        SlidingWindow(slide_after=21)


def test_sliding_window_slides_only_when_the_tail_ran_past_fifteen() -> None:
    window = SlidingWindow()
    first, _ = grown(1)
    assert window.apply(first, "anthropic").path is None
    _, later = grown(15)
    assert window.apply(copy.deepcopy(later), "anthropic").path is None  # 15: within reach
    window.reset()
    window.apply(grown(1)[0], "anthropic")
    _, far = grown(16)
    note = window.apply(far, "anthropic")
    assert note.path == "messages[1].content[14]"  # 15 positions after the write
    assert "16 block positions after" in note.why
    assert far["messages"][1]["content"][14]["cache_control"] == EPHEMERAL


def test_a_changed_prefix_forgets_the_last_write() -> None:
    window = SlidingWindow()
    window.apply(grown(1)[0], "anthropic")
    _, far = grown(30)
    far["system"][0]["text"] = "another system prompt"
    assert window.apply(far, "anthropic").path is None


def builder_with_layers() -> PromptBuilder:
    return (
        PromptBuilder(model=MODEL, min_prefix_tokens=1)
        .tool("lookup", "Find an order.", {"type": "object", "properties": {}})
        .system("You are the agent. " * 50)
        .session("User: Ada.")
    )


@pytest.mark.parametrize("render", ["to_anthropic", "to_bedrock_converse"])
def test_builder_slides_a_breakpoint_and_explains_the_plan(render: str) -> None:
    builder = builder_with_layers()
    builder.add_user("hello").add_assistant("hi")
    first = getattr(builder, render)()
    assert [bp.label for bp in first.breakpoints] == ["tools", "frozen", "session", "history"]
    assert first.plan[1].startswith("system[0] (frozen): end of the frozen layer")
    for i in range(10):  # 20 more history messages at once
        builder.add_user(f"question {i}").add_assistant(f"answer {i}")
    second = getattr(builder, render)()
    labels = [bp.label for bp in second.breakpoints]
    assert labels == ["frozen", "session", "sliding", "history"]  # tools dropped: at most 4
    sliding = second.breakpoints[2]
    assert (sliding.layer, sliding.index) == ("messages", 16)  # 15 messages after messages[1]
    assert "20 block positions after" in sliding.why
    assert any("dropped the tools[0] (tools) breakpoint" in w for w in second.warnings)
    fp = fingerprint_request(second)
    assert len(fp.breakpoints) == 4
    third = getattr(builder.add_user("more").add_assistant("ok"), render)()
    assert "sliding" not in [bp.label for bp in third.breakpoints]


def test_a_fork_starts_without_a_last_write() -> None:
    builder = builder_with_layers()
    builder.add_user("hello").add_assistant("hi").to_anthropic()
    fork = builder.fork()
    for i in range(10):
        fork.add_user(f"q{i}").add_assistant(f"a{i}")
    assert "sliding" not in [bp.label for bp in fork.to_anthropic().breakpoints]


def test_a_conversation_keeps_its_last_write_across_renders() -> None:
    from promptcache import Conversation

    chat = Conversation(builder_with_layers())
    chat.add_user("hello").add_assistant("hi")
    chat.prompt.to_bedrock_converse()
    for i in range(9):  # 18 messages pasted in at once
        chat.add_user(f"q{i}").add_assistant(f"a{i}")
    rendered = chat.prompt.to_bedrock_converse()
    assert "sliding" in [bp.label for bp in rendered.breakpoints]
    assert any(line.startswith("messages[16] (sliding)") for line in rendered.plan)


def test_the_slide_skips_thinking_blocks() -> None:
    window = SlidingWindow()
    window.apply(grown(1)[0], "anthropic")
    _, far = grown(16)
    far["messages"][1]["content"][14] = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    note = window.apply(far, "anthropic")
    assert note.path == "messages[1].content[13]"  # the block before the thinking one


def _marks(params: dict[str, Any], api: str) -> list[str]:
    return [bp.path for bp in fingerprint_request(params, api).breakpoints]


@pytest.mark.parametrize("api", ["anthropic", "bedrock_converse"])
def test_an_agent_loop_over_one_message_list_keeps_one_tail_mark(api: str) -> None:
    # docs/sdk.md's loop: the same `messages` list, two messages longer each turn. The tail
    # mark of turn k stayed on its block in turn k + 1, so turn 3 sent 5 breakpoints (a 400).
    bedrock = api == "bedrock_converse"

    def block(t: str) -> dict[str, Any]:
        return {"text": t} if bedrock else text(t)

    system: list[dict[str, Any]] = [block("You are an agent.")]
    if bedrock:
        system.append({"cachePoint": {"type": "default"}})
    else:
        system[0]["cache_control"] = EPHEMERAL
    top = "system[1]" if bedrock else "system[0]"  # the marker's own path
    messages: list[dict[str, Any]] = [{"role": "user", "content": [block("the task")]}]
    window = SlidingWindow()
    seen = []
    for turn in range(6):
        params: dict[str, Any] = {"model": MODEL, "system": system, "messages": messages}
        window.apply(params, api, tail=True)
        seen.append(_marks(params, api))
        messages += [
            {"role": "assistant", "content": [block(f"step {turn}")]},
            {"role": "user", "content": [block(f"result {turn}")]},
        ]
    tail = "content[1]" if bedrock else "content[0]"
    assert seen == [[top, f"messages[{2 * k}].{tail}"] for k in range(6)]
    # the user's own marker on the last block stays, and is not taken off the turn after
    messages[-1]["content"] = [block("mine")]
    if bedrock:
        messages[-1]["content"].append({"cachePoint": {"type": "default"}})
    else:
        messages[-1]["content"][0]["cache_control"] = EPHEMERAL
    params = {"model": MODEL, "system": system, "messages": messages}
    window.apply(params, api, tail=True)
    assert _marks(params, api) == [top, f"messages[12].{tail}"]
    messages += [{"role": "assistant", "content": [block("step 6")]}]
    params = {"model": MODEL, "system": system, "messages": messages}
    window.apply(params, api, tail=True)
    assert _marks(params, api) == [top, f"messages[12].{tail}", f"messages[13].{tail}"]


def test_a_loop_over_one_list_still_slides_when_a_turn_adds_many_blocks() -> None:
    # the look-alike that must still slide: with the old tail mark gone, a burst of 30 messages
    # gets a sliding mark within reach of the previous write, and the next turn drops it again
    window = SlidingWindow()
    system = [text("You are an agent.", mark=True)]
    messages: list[dict[str, Any]] = [{"role": "user", "content": [text("the task")]}]
    window.apply({"model": MODEL, "system": system, "messages": messages}, "anthropic", tail=True)
    messages += [{"role": "user", "content": [text(f"burst {i}")]} for i in range(30)]
    params: dict[str, Any] = {"model": MODEL, "system": system, "messages": messages}
    note = window.apply(params, "anthropic", tail=True)
    assert note.path == "messages[15].content[0]"
    assert _marks(params, "anthropic") == [
        "system[0]",
        "messages[15].content[0]",
        "messages[30].content[0]",
    ]
    messages += [{"role": "user", "content": [text("one more")]}]
    params = {"model": MODEL, "system": system, "messages": messages}
    assert window.apply(params, "anthropic", tail=True).path is None
    assert _marks(params, "anthropic") == ["system[0]", "messages[31].content[0]"]


@pytest.mark.parametrize("api", ["openai_chat", "gemini", "bedrock"])
def test_apply_refuses_an_api_without_breakpoints_and_marks_nothing(api: str) -> None:
    """An OpenAI chat request given to the window got an Anthropic cache_control on its last
    block (a field OpenAI does not have) and no error."""
    params = {
        "model": "gpt-5",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    with pytest.raises(ConfigError, match=r"use 'anthropic' or 'bedrock_converse'"):
        SlidingWindow().apply(params, api, tail=True)  # type: ignore[arg-type]
    assert "cache_control" not in params["messages"][0]["content"][0]


def test_apply_refuses_a_bad_ttl_and_params_that_are_not_a_dict() -> None:
    params = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    with pytest.raises(ConfigError, match=r"use '5m', '1h' or None, got '2h'"):
        SlidingWindow().apply(params, "anthropic", tail=True, ttl="2h")  # type: ignore[arg-type]
    assert "cache_control" not in params["messages"][0]["content"][0]
    with pytest.raises(RequestShapeError, match=r"needs the request parameters as a dict"):
        SlidingWindow().apply(None, "anthropic", tail=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["anthropic", "bedrock_converse"])
def test_the_tail_mark_never_makes_a_fifth_breakpoint(api: str) -> None:
    """A request with 4 markers of the caller's own got a fifth on its last block from
    apply(tail=True), which the API answers with a 400; the tail is left unmarked now, the
    caller's markers stay, and the note says why."""
    bedrock = api == "bedrock_converse"
    point = {"cachePoint": {"type": "default"}}

    def marked(t: str) -> list[dict[str, Any]]:
        return [{"text": t}, dict(point)] if bedrock else [text(t, mark=True)]

    params: dict[str, Any] = {
        "model": MODEL,
        "system": marked("one") + marked("two"),
        "messages": [
            {"role": "user", "content": marked("q1")},
            {"role": "assistant", "content": marked("a1")},
            {"role": "user", "content": [{"text": "q2"} if bedrock else text("q2")]},
        ],
    }
    before = _marks(params, api)
    assert len(before) == 4
    note = SlidingWindow().apply(params, api, tail=True)
    assert _marks(params, api) == before
    assert note.path is None
    assert note.why == (
        "no tail breakpoint: the request holds 4 breakpoints already, the most the API accepts"
    )
    # with three, the tail is marked as before
    params["messages"][1]["content"] = [{"text": "a1"} if bedrock else text("a1")]
    SlidingWindow().apply(params, api, tail=True)
    assert len(_marks(params, api)) == 4


def test_a_slide_ttl_out_of_order_is_refused_and_a_retry_still_slides() -> None:
    """apply(ttl='1h') put a 1h sliding breakpoint after the system's 5m one, a request the API
    answers with a 400 (longer TTLs first); it is refused now, with no slide placed, and the
    window still slides on a retry with ttl=None."""
    window = SlidingWindow()
    system = [text("You are an agent.", mark=True)]  # 5m
    messages: list[dict[str, Any]] = [{"role": "user", "content": [text("the task")]}]
    window.apply({"model": MODEL, "system": system, "messages": messages}, "anthropic", tail=True)
    messages += [{"role": "user", "content": [text(f"burst {i}")]} for i in range(30)]
    params: dict[str, Any] = {"model": MODEL, "system": system, "messages": messages}
    with pytest.raises(
        BreakpointTTLOrderError, match=r"would come after system\[0\] with ttl '5m'"
    ):
        window.apply(params, "anthropic", tail=True, ttl="1h")
    assert _marks(params, "anthropic") == ["system[0]", "messages[30].content[0]"]
    note = window.apply(params, "anthropic", tail=True)
    assert note.path == "messages[15].content[0]"
    ttls = [bp.ttl for bp in fingerprint_request(params, "anthropic").breakpoints]
    assert ttls == ["5m", "5m", "5m"]
    # a 1h system breakpoint takes a 1h slide
    window = SlidingWindow()
    system = [{**text("You are an agent."), "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    messages = [{"role": "user", "content": [text("the task")]}]
    window.apply({"model": MODEL, "system": system, "messages": messages}, "anthropic", tail=True)
    messages += [{"role": "user", "content": [text(f"burst {i}")]} for i in range(30)]
    params = {"model": MODEL, "system": system, "messages": messages}
    assert window.apply(params, "anthropic", tail=True, ttl="1h").path is not None


@pytest.mark.parametrize("render", ["to_anthropic", "to_bedrock_converse"])
def test_no_room_for_a_slide_says_which_breakpoints_hold_the_four_places(render: str) -> None:
    """A marker, the frozen and session breakpoints (three on the system) and the history one (on
    the newest message) fill the 4 places; the slide cannot take one, and the warning names what
    holds them, one of them on a message, not the tools and system layers alone."""
    builder = (
        PromptBuilder(model=MODEL, min_prefix_tokens=1)
        .system("Rules that change monthly. " * 40)
        .cache_breakpoint()
        .system("Documents that change daily. " * 40)
        .session("User: Ada.")
    )
    builder.add_user("hello").add_assistant("hi")
    getattr(builder, render)()
    for i in range(12):  # 24 history messages at once
        builder.add_user(f"question {i}").add_assistant(f"answer {i}")
    rendered = getattr(builder, render)()
    assert [bp.label for bp in rendered.breakpoints] == ["marker", "frozen", "session", "history"]
    assert rendered.warnings == (
        "no sliding breakpoint: the request holds 4 breakpoints already, the most the API "
        "accepts, and none may give way to one on messages[16] (only a tools breakpoint or one "
        "on an earlier message does; system breakpoints are kept): its newest breakpoint is 24 "
        "block positions after the previous request's last write, and a breakpoint reads at "
        "most 20 back",
    )


def test_no_sliding_breakpoint_for_a_bedrock_model_without_the_documented_lookback() -> None:
    """AWS documents the 20-block lookback for Claude models only (lookback_applies): a Nova
    conversation that grows by 24 messages gets no 'sliding' breakpoint, whose plan would cite
    Anthropic's rule as if it held for Nova, and keeps its frozen, session and history ones;
    a Claude model id, and an id that names no model, slide."""
    renders = {}
    profile = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3"
    for model in (
        "us.amazon.nova-pro-v1:0",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        profile,
    ):
        builder = PromptBuilder(model=model, min_prefix_tokens=1).system("Rules. " * 40)
        builder.session("User: Ada.").add_user("hello").add_assistant("hi")
        builder.to_bedrock_converse()
        for i in range(12):
            builder.add_user(f"question {i}").add_assistant(f"answer {i}")
        renders[model] = builder.to_bedrock_converse()
    nova, claude, opaque = renders.values()
    assert [bp.label for bp in nova.breakpoints] == ["frozen", "session", "history"]
    assert nova.warnings == ()
    assert [bp.label for bp in claude.breakpoints] == ["frozen", "session", "sliding", "history"]
    # an id that names no model may be Claude's: it keeps the slide that saves its prefix
    assert [bp.label for bp in opaque.breakpoints] == ["frozen", "session", "sliding", "history"]
    # the same through SlidingWindow, for a loop that keeps its own Converse messages
    params = {
        "modelId": "amazon.nova-pro-v1:0",
        "messages": [{"role": "user", "content": [{"text": "q"}]}],
    }
    window = SlidingWindow()
    window.apply(params, "bedrock_converse", tail=True)
    for i in range(12):
        params["messages"] += [
            {"role": "assistant", "content": [{"text": f"a{i}"}]},
            {"role": "user", "content": [{"text": f"q{i}"}]},
        ]
    note = window.apply(params, "bedrock_converse", tail=True)
    assert note.path is None
    assert _marks(params, "bedrock_converse") == ["messages[24].content[1]"]
