"""`promptcache hash`: table and JSON output, stdin, api detection and clean errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from promptcache.cli import cli
from promptcache.commands.hash import API_CHOICES
from promptcache.fingerprint import fingerprint_request
from promptcache.segments import APIS

BODY = {
    "model": "claude-sonnet-4-5",
    "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
    "system": [
        {"type": "text", "text": "Rules", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ],
    "messages": [{"role": "user", "content": "hi"}],
}


def test_api_choices_match_the_sdk() -> None:
    assert set(API_CHOICES) == {"auto", *APIS}


def test_table_from_file(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(BODY))
    result = CliRunner().invoke(cli, ["hash", str(path)])
    assert result.exit_code == 0, result.output
    fp = fingerprint_request(BODY, "anthropic")
    for segment, chained in zip(fp.segments, fp.chained, strict=True):
        assert segment.path in result.output
        assert segment.sha256[:12] in result.output and chained[:12] in result.output
    assert "anthropic request, model claude-sonnet-4-5" in result.output
    assert "1h" in result.output
    assert f"prefix hash: {fp.prefix_hash}" in result.output


def test_json_from_stdin_with_explicit_api() -> None:
    result = CliRunner().invoke(
        cli, ["hash", "-", "--api", "anthropic", "--format", "json"], input=json.dumps(BODY)
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    fp = fingerprint_request(BODY, "anthropic")
    assert data["prefix_hash"] == fp.prefix_hash and data["chained"] == fp.chained
    assert [s["sha256"] for s in data["segments"]] == [s.sha256 for s in fp.segments]
    assert "text" not in data["segments"][0]
    assert data["breakpoints"] == [{"path": "system[0]", "ttl": "1h", "segment_index": 1}]


def test_bad_json_and_unknown_shape_are_clean_errors() -> None:
    runner = CliRunner()
    bad = runner.invoke(cli, ["hash", "-"], input="{nope")
    assert bad.exit_code == 2 and "not valid JSON" in bad.output and "Traceback" not in bad.output
    arr = runner.invoke(cli, ["hash", "-"], input="[1, 2]")
    assert arr.exit_code == 2 and "expected a JSON object" in arr.output
    unknown = runner.invoke(cli, ["hash", "-"], input='{"foo": 1}')
    assert unknown.exit_code == 2
    assert "error: cannot tell which API" in unknown.output and "--api" in unknown.output
    wrong = runner.invoke(cli, ["hash", "-", "--api", "openai_completions"], input=json.dumps(BODY))
    assert wrong.exit_code == 2 and "looks like anthropic" in wrong.output
    # the fix is named as a command-line user gives it, as for the undetectable body above
    assert "--api anthropic" in wrong.output
    assert unknown.exception is None or isinstance(unknown.exception, SystemExit)


def test_an_anthropic_body_hashed_as_bedrock_converse_is_an_error_naming_the_fields() -> None:
    # Converse blocks have no cache_control (its marker is a cachePoint block), and its system
    # is a list of blocks (a top-level cache_control alone is an ignored field: a warning)
    blocks = {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    top = {
        "model": "claude-sonnet-4-5",
        "system": "rules",
        "cache_control": {"type": "ephemeral"},
        "messages": [{"role": "user", "content": "q"}],
    }
    for body, named in (
        (blocks, "`system[0].cache_control`, `messages[0].content[0].cache_control`"),
        (top, "`system` as a string"),
    ):
        result = CliRunner().invoke(
            cli, ["hash", "-", "--api", "bedrock_converse"], input=json.dumps(body)
        )
        assert result.exit_code == 2, result.output
        assert f"bedrock_converse request with {named}, which Converse does not" in result.output
        assert "--api anthropic" in result.output and "Traceback" not in result.output
    right = CliRunner().invoke(cli, ["hash", "-", "--api", "anthropic"], input=json.dumps(blocks))
    assert right.exit_code == 0, right.output


def test_a_field_the_api_does_not_read_is_a_warning_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(BODY))
    result = CliRunner().invoke(
        cli, ["hash", "--api", "openai_chat", "--format", "json", str(path)]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "warning: openai_chat requests have no `system`; the hashes leave it out; the body "
        "looks like anthropic: try --api anthropic\n"
    )
    assert json.loads(result.stdout)["api"] == "openai_chat"  # stdout stays valid JSON


def test_no_warning_when_the_api_reads_every_prompt_field(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(BODY))
    for api in ("auto", "anthropic"):
        result = CliRunner().invoke(cli, ["hash", "--api", api, str(path)])
        assert result.exit_code == 0, result.output
        assert result.stderr == ""


def test_fields_named_ignored_are_really_left_out_of_the_hashes() -> None:
    from promptcache.segments import PROMPT_FIELDS, ignored_prompt_fields

    bodies = {
        "anthropic": BODY,
        "openai_chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        "openai_responses": {"model": "m", "input": "hi"},
        "gemini": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        "bedrock_converse": {"modelId": "m", "messages": [{"role": "user", "content": []}]},
        "openai_completions": {"model": "m", "prompt": "hi"},
    }
    assert set(bodies) == set(PROMPT_FIELDS) == set(APIS)
    every = set().union(*PROMPT_FIELDS.values())
    for api, body in bodies.items():
        prefix = fingerprint_request(body, api).prefix_hash
        for field in sorted(every - PROMPT_FIELDS[api]):
            extended = {**body, field: "an ignored value"}
            assert ignored_prompt_fields(extended, api) == [field]
            assert fingerprint_request(extended, api).prefix_hash == prefix, (api, field)


def _marked(ttl: object) -> str:
    block = {"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": ttl}}
    body = {"model": "x", "max_tokens": 1, "messages": [{"role": "user", "content": [block]}]}
    return json.dumps(body)


def test_a_ttl_the_vendor_does_not_accept_is_a_warning_and_marked_invalid() -> None:
    """``"ttl": 5`` (a number, or any text but 5m and 1h) is not a TTL Anthropic accepts; the hash
    is still made (markers never change it) but the table no longer shows a breakpoint "5"."""
    for ttl in (5, "10m", "1H"):
        result = CliRunner().invoke(cli, ["hash", "-", "--api", "anthropic"], input=_marked(ttl))
        assert result.exit_code == 0, result.output
        assert result.stderr == (
            f"warning: the cache marker at messages[0].content[0] has ttl {ttl}; the vendor "
            "accepts only 5m or 1h\n"
        )
        row = next(line for line in result.stdout.splitlines() if "messages[0]" in line)
        assert row.rstrip("│ ").endswith(f"{ttl} (invalid)")
        as_json = CliRunner().invoke(cli, ["hash", "-", "--format", "json"], input=_marked(ttl))
        assert as_json.stderr == result.stderr
        json.loads(as_json.stdout)  # stdout stays valid JSON


def test_a_valid_or_absent_ttl_is_no_warning() -> None:
    for ttl, shown in (("5m", "5m"), ("1h", "1h")):
        result = CliRunner().invoke(cli, ["hash", "-", "--api", "anthropic"], input=_marked(ttl))
        assert result.exit_code == 0 and result.stderr == ""
        row = next(line for line in result.stdout.splitlines() if "messages[0]" in line)
        assert row.rstrip("│ ").endswith(shown)
    body = json.loads(_marked("5m"))
    del body["messages"][0]["content"][0]["cache_control"]["ttl"]  # Anthropic's default, 5m
    result = CliRunner().invoke(cli, ["hash", "-"], input=json.dumps(body))
    assert result.exit_code == 0 and result.stderr == ""


def test_a_1h_marker_after_a_5m_one_is_a_warning() -> None:
    """Longer TTLs must come first in the prefix (the vendor refuses the request otherwise): a 5m
    system marker (one without ttl included) before a 1h one in messages is a warning."""
    mark = {"type": "ephemeral"}
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1,
        "system": [{"type": "text", "text": "s", "cache_control": mark}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "a", "cache_control": {**mark, "ttl": "1h"}},
                {"type": "text", "text": "b", "cache_control": {**mark, "ttl": "5m"}},
            ]},
        ],
    }  # fmt: skip
    warning = (
        "warning: the cache marker at messages[0].content[0] has ttl 1h but follows the one at "
        "system[0] with ttl 5m (a marker without ttl is 5m); longer TTLs must come first in the "
        "prefix, and the vendor refuses the request (Anthropic: 400): give system[0] ttl 1h "
        "too, or messages[0].content[0] ttl 5m\n"
    )
    for fmt in ("table", "json"):
        result = CliRunner().invoke(cli, ["hash", "-", "--format", fmt], input=json.dumps(body))
        assert result.exit_code == 0 and result.stderr == warning, result.output
    # in order (1h, 1h, 5m): no warning
    body["system"][0]["cache_control"] = {**mark, "ttl": "1h"}
    result = CliRunner().invoke(cli, ["hash", "-"], input=json.dumps(body))
    assert result.exit_code == 0 and result.stderr == ""
    # Bedrock's cachePoint: a bare one (5m) in system, then a 1h one in messages
    converse = {
        "modelId": "anthropic.claude-sonnet-4-5",
        "system": [{"text": "s"}, {"cachePoint": {"type": "default"}}],
        "messages": [{"role": "user", "content": [
            {"text": "a"}, {"cachePoint": {"type": "default", "ttl": "1h"}},
        ]}],
    }  # fmt: skip
    result = CliRunner().invoke(
        cli, ["hash", "-", "--api", "bedrock_converse"], input=json.dumps(converse)
    )
    assert result.exit_code == 0
    assert "has ttl 1h but follows the one at system[1] with ttl 5m" in result.stderr


def test_a_long_prompt_counts_with_thousands_separators(tmp_path: Path) -> None:
    # the table printed "approx prefix tokens: 1800" and "5400" chars, where every other
    # command groups its thousands
    from promptcache.tokens import count_tokens

    text = "The quick brown fox jumps. " * 200
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": text}]}
    path = tmp_path / "req.json"
    path.write_text(json.dumps(body))
    result = CliRunner().invoke(cli, ["hash", str(path)])
    assert result.exit_code == 0, result.output
    tokens = count_tokens(text)  # the message's text is the prompt's only counted text
    assert tokens >= 1000
    assert f"approx prefix tokens: {tokens:,}" in result.output
    # the message's canonical JSON: sorted keys, no spaces
    message = {"content": text, "role": "user"}
    chars = len(json.dumps(message, separators=(",", ":"), sort_keys=True, ensure_ascii=False))
    assert chars >= 1000
    assert f" {chars:,} " in result.output


def test_a_response_body_is_named_one_rather_than_asking_for_api(tmp_path: Path) -> None:
    # a response saved from the API (the file `promptcache cost` reads) holds no prompt; the
    # error asked for --api, which then only said that no prompt field was present
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 12, "output_tokens": 3},
    }
    path = tmp_path / "response.json"
    path.write_text(json.dumps(response))
    runner = CliRunner()
    for args in (["hash", str(path)], ["hash", "--api", "anthropic", str(path)]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 2, result.output
        assert "this is a response body (it has `usage`, `stop_reason`), not a request" in (
            result.output
        )
        assert "`promptcache cost`" in result.output
        assert "pass the API explicitly" not in result.output


def test_a_system_role_message_in_an_anthropic_or_converse_body_is_a_warning(
    tmp_path: Path,
) -> None:
    # An OpenAI Chat body (its system prompt as a message) hashed as Anthropic or Bedrock
    # Converse: those APIs take only user and assistant messages and answer 400 (Anthropic:
    # "Unexpected role \"system\"") or a ValidationException, so the hashes are of a request the
    # vendor never caches.
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps(
            {
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": "You are X."},
                    {"role": "user", "content": "hi"},
                ],
            }
        )
    )
    for api in ("anthropic", "bedrock_converse"):
        result = CliRunner().invoke(cli, ["hash", "--api", api, "--format", "json", str(path)])
        assert result.exit_code == 0, result.output
        assert result.stderr == (
            f"warning: messages[0] has role 'system', but {api} requests take only user and "
            "assistant messages (the system prompt goes in "
            f"{'`system`' if api == 'anthropic' else '`system` blocks'}) and the vendor refuses "
            "this one; the body looks like openai_chat: try --api openai_chat\n"
        )
        assert json.loads(result.stdout)["api"] == api
    # the API that takes system-role messages, and Anthropic's own shape, warn about nothing
    for api, body in (
        ("openai_chat", json.loads(path.read_text())),
        ("anthropic", BODY),
        (
            "bedrock_converse",
            {"modelId": "m", "messages": [{"role": "user", "content": [{"text": "hi"}]}]},
        ),
    ):
        result = CliRunner().invoke(cli, ["hash", "--api", api, "-"], input=json.dumps(body))
        assert result.exit_code == 0, result.output
        assert result.stderr == "", (api, result.stderr)
