"""``promptcache hash``: per-segment and chained prefix hashes of a vendor request body."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

import click

from promptcache.commands._json_input import read_json_object
from promptcache.errors import PromptCacheError

if TYPE_CHECKING:
    from promptcache.fingerprint import Breakpoint

#: Same names as promptcache.segments.APIS (kept here so --help imports nothing else;
#: tests/cli/test_hash.py checks they agree).
API_CHOICES = (
    "auto",
    "anthropic",
    "openai_chat",
    "openai_responses",
    "gemini",
    "bedrock_converse",
    "openai_completions",
)
_SHORT = 12
#: The TTLs a cache marker may give (``cache_control`` and Bedrock ``cachePoint``), as
#: promptcache.breakpoints.check_ttl accepts them; any other is refused by the vendor.
VALID_TTLS = ("5m", "1h")


@click.command(name="hash")
@click.argument("request_json", metavar="FILE|-", type=click.File("r", encoding="utf-8-sig"))
@click.option(
    "--api",
    type=click.Choice(API_CHOICES),
    default="auto",
    show_default=True,
    help="Request format; 'auto' detects it from the body's fields.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format. json holds full hashes (segment texts left out).",
)
def hash_command(request_json: IO[str], api: str, output_format: str) -> None:
    """Fingerprint a request body: SHA-256 per tool, system block and message, and the chained
    prefix hash after each. Two requests share a cacheable prefix up to the last row whose
    prefix hash is equal. Cache markers (cache_control, cachePoint) never change a hash.

    \b
    Example:
        promptcache hash request.json
        promptcache hash --api bedrock_converse --format json converse.json
        cat body.json | promptcache hash -
    """
    from promptcache.fingerprint import fingerprint_request
    from promptcache.segments import detect_api, ignored_prompt_fields

    body = read_json_object(request_json, param_hint="FILE", what="a request body")
    fp = fingerprint_request(body, api)
    ignored = ignored_prompt_fields(body, fp.api)
    if ignored:
        fields = ", ".join(f"`{name}`" for name in ignored)
        try:
            looks = detect_api(body)
        except PromptCacheError:
            looks = fp.api
        hint = f"; the body looks like {looks}: try --api {looks}" if looks != fp.api else ""
        click.echo(
            f"warning: {fp.api} requests have no {fields}; the hashes leave "
            f"{'it' if len(ignored) == 1 else 'them'} out{hint}",
            err=True,
        )
    role = _foreign_role_warning(body, fp.api)
    if role is not None:
        click.echo(f"warning: {role}", err=True)
    for bp in fp.breakpoints:
        if bp.ttl is not None and bp.ttl not in VALID_TTLS:
            click.echo(
                f"warning: the cache marker at {bp.path} has ttl {bp.ttl}; the vendor accepts "
                "only 5m or 1h",
                err=True,
            )
    order = _ttl_order_warning(fp.breakpoints)
    if order is not None:
        click.echo(f"warning: {order}", err=True)
    if output_format == "json":
        data: dict[str, Any] = fp.to_dict()
        for segment in data["segments"]:
            del segment["text"]
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return

    from rich.console import Console
    from rich.table import Table

    marks: dict[int, list[str]] = {}
    for bp in fp.breakpoints:
        shown = bp.ttl or "vendor"
        if bp.ttl is not None and bp.ttl not in VALID_TTLS:
            shown = f"{bp.ttl} (invalid)"
        marks.setdefault(bp.segment_index, []).append(shown)
    table = Table(title=f"{fp.api} request, model {fp.model or '-'}")
    for column in ("#", "segment", "kind", "chars", "sha256", "prefix hash", "breakpoint"):
        table.add_column(column, justify="right" if column in ("#", "chars") else "left")
    for i, (segment, chained) in enumerate(zip(fp.segments, fp.chained, strict=True)):
        table.add_row(
            str(i),
            segment.path,
            segment.kind,
            f"{segment.num_chars:,}",
            segment.sha256[:_SHORT],
            chained[:_SHORT],
            ", ".join(marks.get(i, [])),
        )
    console = Console(width=110)
    console.print(table)
    console.print(
        f"segments: {len(fp.segments):,}   approx prefix tokens: {fp.approx_prefix_tokens:,}"
    )
    console.print(f"prefix hash: {fp.prefix_hash}")


def _foreign_role_warning(body: dict[str, Any], api: str) -> str | None:
    """What is wrong with the first message whose role ``api`` does not take, with the API the
    body looks like; None when every message's role is one it takes (or ``api`` takes any).

    Anthropic Messages and Bedrock Converse take only ``user`` and ``assistant`` messages, the
    system prompt in a field of its own: Anthropic answers 400 (``Unexpected role "system"``,
    https://platform.claude.com/docs/en/api/messages), Converse a ValidationException
    (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Message.html). An
    OpenAI Chat body hashed as either (its system prompt a ``system`` or ``developer`` message)
    is a request the vendor never answers, let alone caches.
    """
    from promptcache.segments import detect_api

    if api not in ("anthropic", "bedrock_converse"):
        return None
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if type(role) is str and role not in ("user", "assistant"):
            where = "`system`" if api == "anthropic" else "`system` blocks"
            try:
                looks = detect_api(body)
            except PromptCacheError:
                looks = api
            hint = f"; the body looks like {looks}: try --api {looks}" if looks != api else ""
            return (
                f"messages[{i}] has role {role!r}, but {api} requests take only user and "
                f"assistant messages (the system prompt goes in {where}) and the vendor refuses "
                f"this one{hint}"
            )
    return None


def _ttl_order_warning(breakpoints: Sequence[Breakpoint]) -> str | None:
    """The first ``1h`` marker that follows a ``5m`` one, said with what to change; None when
    the TTLs fall in order. A marker without ``ttl`` counts as the vendor's ``5m``.

    Both vendors that let a request set a TTL refuse one whose longer TTLs do not come first in
    the prefix (tools, then system, then messages). Checked 2026-12-05:
    Anthropic, https://platform.claude.com/docs/en/build-with-claude/prompt-caching ("Mixing
    different TTLs"; the rule as quoted in
    https://portkey.ai/docs/aigw/integrations/llms/anthropic/prompt-caching: "1-hour entries
    must appear before 5-minute entries"), a 400; Bedrock ``cachePoint``, TTLs non-increasing
    across toolConfig, system and messages (https://strandsagents.com/docs/api/typescript/
    BedrockCacheTTL/, citing
    https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CachePointBlock.html),
    a ValidationException. ``PromptBuilder`` raises ``BreakpointTTLOrderError`` and
    ``promptcache check`` reports PC014 for the same order.
    """
    from promptcache.fingerprint import ttl_out_of_order

    found = ttl_out_of_order(breakpoints)
    if found is None:
        return None
    bp, shorter = found
    return (
        f"the cache marker at {bp.path} has ttl 1h but follows the one at {shorter[0].path} "
        "with ttl 5m (a marker without ttl is 5m); longer TTLs must come first in the prefix, "
        "and the vendor refuses the request (Anthropic: 400): give "
        f"{' and '.join(b.path for b in shorter)} ttl 1h too, or {bp.path} ttl 5m"
    )
