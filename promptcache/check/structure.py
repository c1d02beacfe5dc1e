"""Structure checks on each captured request: vendor rules a request breaks by itself.

The request as the program really sent it, not the code's shape (rules checked 2026-12-03
against https://platform.claude.com/docs/en/build-with-claude/prompt-caching and
https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html):

- ``PC007``: more than 4 cache breakpoints (``promptcache.breakpoints.MAX_BREAKPOINTS``); the
  API answers 400;
- ``PC014``: a ``"1h"`` breakpoint after a ``"5m"`` one (the API answers 400);
- ``PC008``: a breakpoint whose prefix is below the model's minimum cacheable length
  (``promptcache.minimums``; the linter's conservative value): it writes nothing;
- ``PC013``: a request that continues an earlier request's prompt from the same call site
  (carries its whole prompt and adds to it) under another OpenAI ``prompt_cache_key``: the key
  routes requests to a cache, so the continuation is sent where the prefix is not
  (https://developers.openai.com/api/docs/guides/prompt-caching , checked 2026-12-03);
- ``PC018``: a request that carries an earlier request's cached prefix but has no breakpoint
  within 20 block positions after that request's last write (``promptcache.lookback``): the
  moving window outran the lookback, so the write is never found.
"""

from __future__ import annotations

from collections.abc import Sequence

from promptcache.breakpoints import MAX_BREAKPOINTS
from promptcache.fingerprint import RequestFingerprint, ttl_out_of_order
from promptcache.lookback import check_lookback, lookback_applies
from promptcache.minimums import ModelMinimums

from .findings import Finding
from .pairing import (
    EXPLICIT_BREAKPOINT_APIS,
    Sent,
    anthropic_tool_tokens,
    cached_extent,
    minimum_tokens,
    prefix_tokens,
)

__all__ = ["structure_findings"]


def _carries(old: RequestFingerprint, new: RequestFingerprint) -> bool:
    """Whether ``new`` repeats ``old``'s cached segments unchanged."""
    extent = cached_extent(old)
    if extent < 0 or len(new.segments) <= extent:
        return False
    return all(
        o.sha256 == n.sha256 for o, n in zip(old.segments[: extent + 1], new.segments, strict=False)
    )


def _one(sent: Sent, minimums: ModelMinimums) -> list[Finding]:
    fp = sent.fingerprint
    if fp.api not in EXPLICIT_BREAKPOINT_APIS or not fp.breakpoints:
        return []
    out: list[Finding] = []

    def add(rule: str, path: str, message: str) -> None:
        out.append(Finding(rule, "structure", (), sent.site, fp.api, path, message))

    if len(fp.breakpoints) > MAX_BREAKPOINTS:
        add(
            "PC007",
            fp.breakpoints[MAX_BREAKPOINTS].path,
            f"{len(fp.breakpoints)} cache breakpoints in one request; the API accepts at most "
            f"{MAX_BREAKPOINTS} and answers 400",
        )
    out_of_order = ttl_out_of_order(fp.breakpoints)
    if out_of_order is not None:
        late, shorter = out_of_order
        add(
            "PC014",
            late.path,
            f'a "1h" breakpoint ({late.path}) follows a "5m" one ({shorter[0].path}); the API '
            'answers 400: put every "1h" breakpoint before the "5m" ones',
        )
    minimum = minimum_tokens(fp.model, minimums)
    if minimum is not None:
        for bp in fp.breakpoints:
            tokens = prefix_tokens(fp, bp.segment_index)
            if tokens < minimum:
                added = anthropic_tool_tokens(fp, bp.segment_index)
                of_tools = f" ({added} of them the API's own tools' definitions)" if added else ""
                add(
                    "PC008",
                    bp.path,
                    f"the breakpoint at {bp.path} closes a prefix of about {tokens} "
                    f"token{'' if tokens == 1 else 's'}{of_tools}, below "
                    f"{fp.model}'s minimum of {minimum}: it writes nothing to the cache",
                )
                break
    return out


def _key_change(sent: Sent, earlier: Sequence[Sent], minimums: ModelMinimums) -> list[Finding]:
    fp = sent.fingerprint
    if sent.routing_key is None:
        return []
    minimum = minimum_tokens(fp.model, minimums)
    for prev in reversed(earlier):
        old = prev.fingerprint
        if (
            prev.routing_key is None
            or prev.site != sent.site
            or old.api != fp.api
            or old.model != fp.model
            or len(fp.segments) <= len(old.segments)
            or not _carries(old, fp)
        ):
            continue
        if minimum is not None and prefix_tokens(old, len(old.segments) - 1) < minimum:
            return []
        if prev.routing_key == sent.routing_key:
            return []
        message = (
            f"prompt_cache_key changes from {prev.routing_key!r} to {sent.routing_key!r} while "
            "the prompt continues an earlier request's: the continuation is routed away from "
            "the cached prefix"
        )
        return [Finding("PC013", "structure", (), sent.site, fp.api, "prompt_cache_key", message)]
    return []


def structure_findings(sents: Sequence[Sent], minimums: ModelMinimums) -> list[Finding]:
    """Every structure finding in one run's requests (in arrival order)."""
    out: list[Finding] = []
    for index, sent in enumerate(sents):
        out += _one(sent, minimums)
        out += _key_change(sent, sents[:index], minimums)
        fp = sent.fingerprint
        if not lookback_applies(fp.api, fp.model):
            continue
        earlier = [
            p
            for p in sents[:index]
            if p.fingerprint.api == fp.api
            and p.fingerprint.model == fp.model
            and _carries(p.fingerprint, fp)
        ]
        if not earlier:
            continue
        found = check_lookback(earlier[-1].fingerprint, fp)
        if found is not None and found[0].reason == "lookback_exceeded":
            verdict, write_path = found
            out.append(
                Finding(
                    "PC018", "structure", (), sent.site, fp.api, verdict.path,
                    verdict.describe(write_path),
                )
            )  # fmt: skip
    return out
