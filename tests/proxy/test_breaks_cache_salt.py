"""`cache_salt` (our engine's and vLLM's tenant isolation) through the proxy's break explainer.

Requests with different salts never share KV blocks, so a tenant's first request cannot read
another tenant's copy of the same prompt: it opens a prefix of its own, it is no unexpected
miss. A real tinystories engine on 127.0.0.1 behind a real proxy, a real SQLite log and report.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from proxy_support import RunningProxy

from promptcache.proxy.config import UpstreamConfig
from promptcache.proxy.report import build_report
from promptcache.proxy.report.page import build_page
from promptcache.proxy.report.render import render_table

PROMPT = (
    "Once upon a time, there was a little girl named Lily. She liked to play outside in the "
    "park with her friends and her dog, who was very fast and liked to run after the ball."
)


def test_a_new_salt_opens_its_own_prefix_and_is_no_unexpected_miss(
    start_proxy: Callable[..., RunningProxy], engine_url: str
) -> None:
    engine = UpstreamConfig(name="openai", url=engine_url, vendor="engine")
    proxy = start_proxy(upstreams={"openai": engine})
    cached = []
    for salt in ("tenant-a", "tenant-b", "tenant-a", "tenant-b"):
        body = {"model": "tiny", "prompt": PROMPT, "max_tokens": 2, "cache_salt": salt}
        response = httpx.post(f"{proxy.url}/v1/completions", json=body, timeout=60)
        assert response.status_code == 200, response.text
        cached.append(response.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
    # the engine's own figures: each tenant's first request reads nothing, its second reads
    assert cached[0] == cached[1] == 0 and cached[2] > 0 and cached[3] > 0
    rows = proxy.rows(4)
    assert [r["cache_read_tokens"] for r in rows] == cached
    assert [r["break_reason"] for r in rows] == ["new_prefix", "new_prefix", None, None]
    assert [r["unexpected_miss"] for r in rows] == [0, 0, 0, 0]
    assert [r["expected_hit"] for r in rows] == [0, 0, 1, 1]

    report = build_report(proxy.db_path, since=time.time() - 3600, until=time.time() + 60)
    assert report.total.unexpected_misses == 0
    text = render_table(report, width=200)
    assert "wait for its first token before fanning out" not in text


def test_each_salt_is_a_family_of_its_own_in_the_report(
    start_proxy: Callable[..., RunningProxy], engine_url: str
) -> None:
    # both tenants' rows got the prompt's first segment hash as their family, so the report's
    # families table (and TTL advice, stored prefixes) showed the two caches as one family
    engine = UpstreamConfig(name="openai", url=engine_url, vendor="engine")
    proxy = start_proxy(upstreams={"openai": engine})
    for salt in ("tenant-a", "tenant-b", "tenant-a", "tenant-b", None):
        body = {"model": "tiny", "prompt": PROMPT, "max_tokens": 2}
        if salt is not None:
            body["cache_salt"] = salt
        response = httpx.post(f"{proxy.url}/v1/completions", json=body, timeout=60)
        assert response.status_code == 200, response.text
    rows = proxy.rows(5)
    families = [r["prefix_family"] for r in rows]
    assert families[0] == families[2] and families[1] == families[3]
    assert len({families[0], families[1], families[4]}) == 3, families
    assert families[4] == rows[4]["first_segment_hash"]  # unsalted: the first segment's hash

    report = build_report(proxy.db_path, since=time.time() - 3600, until=time.time() + 60)
    page = build_page(report)
    assert sorted(f.requests for f in page.families) == [1, 2, 2], page.families
