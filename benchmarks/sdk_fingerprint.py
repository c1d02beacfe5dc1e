"""Per-request cost of fingerprinting a large prompt (what the proxy pays on every request).

Times, as medians over ``--repeats`` runs in this one process, on the ~10,000-token
coding-assistant request from ``examples/sdk_quickstart.py`` rendered for Anthropic:

- baseline: ``json.dumps`` of the body (what any proxy already pays to log it);
- ``canonical_json`` of the body;
- ``fingerprint_request`` (canonical JSON + SHA-256 per segment + chain + cl100k token count)
  on a request whose segments were seen before (token counts memoised by segment hash: the
  proxy's common case), on unseen segments (every segment tokenized), and the first call in
  the process (loads the cl100k_base encoder);
- ``first_divergence`` between two requests that differ only in the question.

Usage::

    .venv/bin/python benchmarks/sdk_fingerprint.py
    .venv/bin/python benchmarks/sdk_fingerprint.py --repeats 21
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from sdk_quickstart import build_prompt

from promptcache import canonical_json, fingerprint, fingerprint_request, first_divergence, tokens


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``fn()`` in milliseconds over ``repeats`` calls."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()

    body = dict(build_prompt("Why does listing invoices take 4 seconds?").to_anthropic())
    other = dict(build_prompt("How do I add an index on invoices.customer_id?").to_anthropic())
    size = len(json.dumps(body).encode())

    tokens._cl100k.cache_clear()
    start = time.perf_counter()
    fp = fingerprint_request(body, "anthropic")
    cold_ms = (time.perf_counter() - start) * 1000
    fp_other = fingerprint_request(other, "anthropic")

    def uncached_tokens() -> None:
        fingerprint._TOKENS_BY_SHA.clear()
        fingerprint_request(body, "anthropic")

    base = median_ms(lambda: json.dumps(body), args.repeats)
    canon = median_ms(lambda: canonical_json(body), args.repeats)
    warm = median_ms(lambda: fingerprint_request(body, "anthropic"), args.repeats)
    unseen = median_ms(uncached_tokens, args.repeats)
    diverge = median_ms(lambda: first_divergence(fp, fp_other), args.repeats)

    print(
        f"request: {size:,} bytes, {len(fp.segments)} segments, ~{fp.approx_prefix_tokens:,} tokens"
    )
    print(f"json.dumps (baseline)        {base:8.3f} ms")
    print(f"canonical_json               {canon:8.3f} ms  ({canon / base:.1f}x baseline)")
    print(f"fingerprint_request (repeat) {warm:8.3f} ms  ({warm / base:.1f}x baseline)")
    print(f"fingerprint_request (unseen) {unseen:8.3f} ms  (every segment tokenized)")
    print(f"fingerprint_request (cold)   {cold_ms:8.3f} ms  (first call: loads cl100k_base)")
    print(f"first_divergence             {diverge:8.3f} ms")


if __name__ == "__main__":
    main()
