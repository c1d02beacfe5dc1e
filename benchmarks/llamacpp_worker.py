"""llama.cpp side of ``engine_vs_llamacpp.py``: run by the llama-cpp-python venv's interpreter.

Never imported by our code or tests (``llama_cpp`` is not installed in our venv). Protocol: one
JSON object per line on stdin, one JSON reply per line on stdout.

- ``{"op": "run", "ids": [...], "new": N, "reuse": bool}``: greedy-generate ``N`` tokens for
  the token ids. ``reuse`` keeps the KV of the previous prompt, so ``Llama.generate`` evaluates
  only the tokens after the longest common prefix (llama-cpp-python's prompt-prefix reuse);
  otherwise ``reset()`` first (a cold prompt). Reply: ``{"ttft_s", "decode_s", "tokens"}``
  (``decode_s`` = time from the first to the last generated token).
- ``{"op": "rss"}``: reply ``{"peak_rss_bytes"}`` (this process's VmHWM).
"""

from __future__ import annotations

import json
import sys
import time


def peak_rss_bytes() -> int:
    """This process's peak resident set size (VmHWM of /proc/self/status), bytes."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    from llama_cpp import Llama

    model, threads, n_ctx = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    llm = Llama(
        model_path=model, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False
    )
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "rss":
            print(json.dumps({"peak_rss_bytes": peak_rss_bytes()}), flush=True)
            continue
        if not cmd.get("reuse"):
            llm.reset()
        tokens: list[int] = []
        start = time.perf_counter()
        first = start
        for token in llm.generate(cmd["ids"], top_k=1, temp=0.0, reset=True):
            tokens.append(int(token))
            if len(tokens) == 1:
                first = time.perf_counter()
            if len(tokens) == cmd["new"]:
                break
        end = time.perf_counter()
        reply = {"ttft_s": first - start, "decode_s": end - first, "tokens": tokens}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
