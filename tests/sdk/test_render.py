"""Renderers: exact wire JSON through the official anthropic/openai clients; Gemini/Bedrock shapes.

The clients send through an in-process ``MockTransport`` (these SDK versions take an ``httpx2``
client), so the assertions are on the bytes the real client would put on the wire.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from promptcache.canonical import canonical_json
from promptcache.errors import ConfigError
from promptcache.fingerprint import fingerprint_request
from promptcache.prompt import PromptBuilder

SCHEMA = {"type": "object", "required": ["sql"], "properties": {"sql": {"type": "string"}}}
SORTED_SCHEMA = {"properties": {"sql": {"type": "string"}}, "required": ["sql"], "type": "object"}


def small_builder(**kwargs: Any) -> PromptBuilder:
    b = PromptBuilder("claude-sonnet-4-5", cache_key="tenant-42", min_prefix_tokens=1, **kwargs)
    b.tool("run_sql", "Run SQL.", SCHEMA)
    b.system("You are a reviewer.").rules("Be brief.")
    b.session("User: Ada.")
    b.add_user("Hi").add_assistant("Hello")
    b.dynamic("Why slow?")
    return b


class Recorder:
    """Captures requests and answers with a fixed JSON body."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(200, json=self.answer)

    @property
    def body(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.requests[-1].content)
        return loaded


ANTHROPIC_ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Add an index."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 4},
}
CHAT_ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-5",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
RESPONSES_ANSWER = {
    "id": "resp_1",
    "object": "response",
    "created_at": 0,
    "model": "gpt-5",
    "status": "completed",
    "output": [],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}


def test_anthropic_wire_json() -> None:
    recorder = Recorder(ANTHROPIC_ANSWER)
    client = anthropic.Anthropic(
        api_key="test",
        base_url="http://anthropic.test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(recorder)),
    )
    params = small_builder(ttl={"tools": "1h"}).to_anthropic(max_tokens=256)
    message = client.messages.create(**params)
    assert message.content[0].text == "Add an index."  # type: ignore[union-attr]
    assert recorder.requests[-1].url.path == "/v1/messages"
    eph = {"type": "ephemeral"}
    assert recorder.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "tools": [
            {
                "name": "run_sql",
                "description": "Run SQL.",
                "input_schema": SORTED_SCHEMA,
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            }
        ],
        "system": [
            {"type": "text", "text": "You are a reviewer."},
            {"type": "text", "text": "Be brief.", "cache_control": eph},
            {"type": "text", "text": "User: Ada.", "cache_control": eph},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Hello", "cache_control": eph}],
            },
            {"role": "user", "content": [{"type": "text", "text": "Why slow?"}]},
        ],
    }
    # the schema goes out byte-for-byte in canonical (sorted, compact) form
    assert canonical_json(SORTED_SCHEMA).encode() in recorder.requests[-1].content


def test_anthropic_dynamic_after_user_history_is_its_own_message() -> None:
    b = PromptBuilder("claude-sonnet-4-5", min_prefix_tokens=1).system("Role.")
    b.add_user("first question").dynamic("live data")
    messages = b.to_anthropic()["messages"]
    assert [m["role"] for m in messages] == ["user", "user"]
    assert messages[0]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_openai_chat_wire_json() -> None:
    recorder = Recorder(CHAT_ANSWER)
    client = openai.OpenAI(
        api_key="test",
        base_url="http://openai.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(recorder)),
    )
    b = small_builder()
    b.model = "gpt-5"
    params = b.to_openai_chat(retention="24h", max_completion_tokens=300)
    client.chat.completions.create(**params)
    assert recorder.requests[-1].url.path == "/v1/chat/completions"
    assert recorder.body == {
        "model": "gpt-5",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "run_sql",
                    "description": "Run SQL.",
                    "parameters": SORTED_SCHEMA,
                },
            }
        ],
        "messages": [
            {"role": "system", "content": "You are a reviewer.\n\nBe brief."},
            {"role": "system", "content": "User: Ada."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Why slow?"},
        ],
        "max_completion_tokens": 300,
        "prompt_cache_key": "tenant-42",
        "prompt_cache_retention": "24h",
    }
    assert params.warnings == ()  # min_prefix_tokens=1 in small_builder


def test_openai_prompt_below_minimum_is_warned() -> None:
    small = PromptBuilder("gpt-5").system("Role.").dynamic("q")
    (warning,) = small.to_openai_chat(include_cache_key=False).warnings
    assert "below the OpenAI minimum of 1024 tokens (OpenAI GPT and o-series" in warning
    (warning,) = small.to_openai_responses(include_cache_key=False).warnings
    assert "nothing will be cached" in warning
    vllm = PromptBuilder("my-local-llama").system("Role.").dynamic("q")
    assert vllm.to_openai_chat(include_cache_key=False).warnings == ()  # unknown: no claim


def test_a_claude_builder_rendered_for_openai_is_warned_with_openais_rule_and_source() -> None:
    # The minimum and the page cited are those of the API the request goes to, not of the
    # vendor whose model id the builder carries.
    claude = PromptBuilder("claude-sonnet-4-5").system("Role.").dynamic("q")
    (warning,) = claude.to_openai_chat(include_cache_key=False).warnings
    assert "below the OpenAI minimum of 1024 tokens (OpenAI GPT and o-series; " in warning
    assert "https://developers.openai.com/api/docs/guides/prompt-caching" in warning
    assert "Claude" not in warning and "platform.claude.com" not in warning
    (warning,) = claude.to_gemini().warnings
    assert "below the Gemini minimum of" in warning and "ai.google.dev" in warning
    assert "Claude" not in warning


def test_openai_responses_wire_json() -> None:
    recorder = Recorder(RESPONSES_ANSWER)
    client = openai.OpenAI(
        api_key="test",
        base_url="http://openai.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(recorder)),
    )
    b = small_builder()
    b.model = "gpt-5"
    client.responses.create(**b.to_openai_responses(max_output_tokens=100))
    assert recorder.requests[-1].url.path == "/v1/responses"
    assert recorder.body == {
        "model": "gpt-5",
        "tools": [
            {
                "type": "function",
                "name": "run_sql",
                "description": "Run SQL.",
                "parameters": SORTED_SCHEMA,
            }
        ],
        "instructions": "You are a reviewer.\n\nBe brief.",
        "input": [
            {"role": "developer", "content": "User: Ada."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Why slow?"},
        ],
        "max_output_tokens": 100,
        "prompt_cache_key": "tenant-42",
    }


def test_openai_cache_key_is_never_invented() -> None:
    b = PromptBuilder("gpt-5").system("Role.").dynamic("q")
    for render in (b.to_openai_chat, b.to_openai_responses):
        with pytest.raises(
            ConfigError, match=r"asked for a prompt_cache_key but the builder has none"
        ):
            render()
        assert "prompt_cache_key" not in render(include_cache_key=False)
    with pytest.raises(ConfigError, match=r"retention must be 'in_memory' or '24h'"):
        b.to_openai_chat(include_cache_key=False, retention="1h")
    with pytest.raises(ConfigError, match=r"system_role must be"):
        b.to_openai_chat(include_cache_key=False, system_role="user")  # type: ignore[arg-type]
    dev = b.to_openai_chat(include_cache_key=False, system_role="developer")
    assert dev["messages"][0] == {"role": "developer", "content": "Role."}


def test_gemini_body_shape() -> None:
    body = small_builder().to_gemini()
    # https://ai.google.dev/api/generate-content : roles are user and model
    assert body == {
        "systemInstruction": {
            "parts": [
                {"text": "You are a reviewer."},
                {"text": "Be brief."},
                {"text": "User: Ada."},
            ]
        },
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "run_sql",
                        "description": "Run SQL.",
                        "parametersJsonSchema": SORTED_SCHEMA,
                    }
                ]
            }
        ],
        "contents": [
            {"role": "user", "parts": [{"text": "Hi"}]},
            {"role": "model", "parts": [{"text": "Hello"}]},
            {"role": "user", "parts": [{"text": "Why slow?"}]},
        ],
    }
    assert "model" not in body  # the model is part of Gemini's URL


def test_bedrock_converse_shape() -> None:
    b = small_builder(ttl={"tools": "1h", "frozen": "1h"})
    b.model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    params = b.to_bedrock_converse(max_tokens=200)
    point = {"cachePoint": {"type": "default"}}
    point_1h = {"cachePoint": {"type": "default", "ttl": "1h"}}
    assert params == {
        "modelId": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "run_sql",
                        "description": "Run SQL.",
                        "inputSchema": {"json": SORTED_SCHEMA},
                    }
                },
                point_1h,
            ]
        },
        "system": [
            {"text": "You are a reviewer."},
            {"text": "Be brief."},
            point_1h,
            {"text": "User: Ada."},
            point,
        ],
        "messages": [
            {"role": "user", "content": [{"text": "Hi"}]},
            {"role": "assistant", "content": [{"text": "Hello"}, point]},
            {"role": "user", "content": [{"text": "Why slow?"}]},
        ],
        "inferenceConfig": {"maxTokens": 200},
    }
    fp = fingerprint_request(params, "bedrock_converse")
    assert [(bp.path, bp.ttl) for bp in fp.breakpoints] == [
        ("toolConfig.tools[1]", "1h"),
        ("system[2]", "1h"),
        ("system[4]", "5m"),
        ("messages[1].content[1]", "5m"),
    ]


def test_bedrock_merges_dynamic_into_trailing_user_turn() -> None:
    b = PromptBuilder("anthropic.claude-sonnet-4-5-20250929-v1:0", min_prefix_tokens=1)
    b.system("Role.").add_user("question").dynamic("logs")
    messages = b.to_bedrock_converse()["messages"]
    assert messages == [
        {
            "role": "user",
            "content": [
                {"text": "question"},
                {"cachePoint": {"type": "default"}},
                {"text": "logs"},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("roles", "message"),
    [
        (("user", "user"), "history messages 0 and 1 are both user messages"),
        (("user", "assistant", "assistant"), "history messages 1 and 2 are both assistant"),
        (("assistant", "user"), "the history starts with an assistant message"),
    ],
)
def test_bedrock_refuses_a_history_converse_would_reject(
    roles: tuple[str, ...], message: str
) -> None:
    # Converse answers a ValidationException for these ("A conversation must alternate between
    # user and assistant roles", "... must start with a user message"); the builder says so and
    # how to fix it before anything is sent
    b = PromptBuilder("anthropic.claude-sonnet-4-5-20250929-v1:0", min_prefix_tokens=1)
    b.system("Role.")
    for i, role in enumerate(roles):
        (b.add_user if role == "user" else b.add_assistant)(f"turn {i}")
    b.dynamic("logs")
    with pytest.raises(ConfigError, match="Converse requires") as info:
        b.to_bedrock_converse()
    assert message in str(info.value)


def test_bedrock_accepts_an_alternating_history() -> None:
    b = PromptBuilder("anthropic.claude-sonnet-4-5-20250929-v1:0", min_prefix_tokens=1)
    b.system("Role.").add_user("a").add_assistant("b").add_user("c").add_assistant("d")
    messages = b.dynamic("e").to_bedrock_converse()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]


@pytest.mark.parametrize(
    "api", ["anthropic", "openai_chat", "openai_responses", "gemini", "bedrock_converse"]
)
def test_frozen_prefix_is_stable_across_questions(api: str) -> None:
    first = small_builder()
    second = small_builder().clear_dynamic().dynamic("A different question")
    a, b = first.fingerprint(api), second.fingerprint(api)
    assert a.segments[:-1] == b.segments[:-1]
    assert a.segments[-1].sha256 != b.segments[-1].sha256


def test_fingerprint_rejects_unknown_api() -> None:
    with pytest.raises(ConfigError, match=r"fingerprint\(api='cohere'\)"):
        small_builder().fingerprint("cohere")


def test_an_openai_builder_rendered_for_anthropic_or_bedrock_is_warned_with_their_rule() -> None:
    # A gpt-4o builder's row is OpenAI's (1024 tokens, automatic caching); the request goes to
    # an API with explicit breakpoints and its own per-model minimums, so the breakpoints are
    # checked against that API's rows (the smallest of them: a breakpoint below it caches on no
    # model there) and the warning names both.
    gpt = PromptBuilder("gpt-4o").system("word " * 800).dynamic("q")
    (frozen,) = gpt.to_anthropic().breakpoints
    assert 512 < frozen.prefix_tokens < 1024  # below OpenAI's minimum, above Claude Opus 5's
    for rendered, api in (
        (gpt.to_anthropic(), "Anthropic"),
        (gpt.to_bedrock_converse(), "Bedrock"),
    ):
        (warning,) = rendered.warnings
        assert warning.startswith(
            f"model 'gpt-4o' is an OpenAI model (OpenAI GPT and o-series), not one of the {api} "
            "API's, whose caching rules differ: breakpoints were checked against the smallest "
            f"{api} minimum, 512 tokens (Claude Opus 5 / Fable 5 / Mythos 5; "
            "https://platform.claude.com/docs/en/build-with-claude/prompt-caching, checked "
        )
        assert "developers.openai.com" not in warning
        assert [bp.label for bp in rendered.breakpoints] == ["frozen"]
    short = PromptBuilder("gpt-4o").system("word " * 300).dynamic("q").to_anthropic()
    assert short.breakpoints == ()
    skipped = short.warnings[1]
    assert "below the minimum of 512 tokens (Claude Opus 5" in skipped
    assert "OpenAI" not in skipped
    own = PromptBuilder("gpt-4o", min_prefix_tokens=100).system("word " * 300).dynamic("q")
    assert own.to_anthropic().warnings == (
        "model 'gpt-4o' is an OpenAI model (OpenAI GPT and o-series), not one of the Anthropic "
        "API's, whose caching rules differ: breakpoints were checked against min_prefix_tokens "
        "(100)",
    )
    # Claude on Bedrock is Bedrock's own: no such warning
    claude = PromptBuilder("claude-sonnet-4-5").system("word " * 1100).dynamic("q")
    assert claude.to_bedrock_converse().warnings == ()
