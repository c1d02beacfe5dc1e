"""llama.cpp side of ``engine_speculative.py``: run by the llama-cpp-python venv's interpreter.

Never imported by our code or tests (``llama_cpp`` is not installed in our venv). It loads the
GGUF twice: a plain ``Llama`` and one with ``LlamaPromptLookupDecoding`` as its draft model
(llama-cpp-python's prompt lookup decoding, ``llama_cpp/llama_speculative.py``). Protocol: one
JSON object per line on stdin, one JSON reply per line on stdout.

- ``{"op": "run", "ids": [...], "new": N, "stop_ids": [...], "lookup": bool}``: greedy-generate
  up to ``N`` tokens (ending early after a token of ``stop_ids``) from the token ids, after
  ``reset()``, with or without prompt lookup. Reply: ``{"ttft_s", "decode_s", "tokens"}``
  (``decode_s`` = time from the first to the last generated token).

Usage: ``python llamacpp_lookup_worker.py MODEL THREADS N_CTX NUM_PRED_TOKENS MAX_NGRAM_SIZE``.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    model, threads, n_ctx = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    num_pred_tokens, max_ngram_size = int(sys.argv[4]), int(sys.argv[5])
    common = {
        "model_path": model,
        "n_ctx": n_ctx,
        "n_threads": threads,
        "n_threads_batch": threads,
        "verbose": False,
    }
    plain = Llama(**common)
    # logits_all=True as well: llama-cpp-python 0.3.36 turns it on for a draft model but sizes
    # its scores array from the argument (n_batch rows), which breaks past 512 tokens.
    lookup = Llama(
        **common,
        logits_all=True,
        draft_model=LlamaPromptLookupDecoding(
            num_pred_tokens=num_pred_tokens, max_ngram_size=max_ngram_size
        ),
    )
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        llm = lookup if cmd["lookup"] else plain
        stop_ids = set(cmd["stop_ids"])
        llm.reset()
        tokens: list[int] = []
        start = time.perf_counter()
        first = start
        for token in llm.generate(cmd["ids"], top_k=1, temp=0.0, reset=True):
            tokens.append(int(token))
            if len(tokens) == 1:
                first = time.perf_counter()
            if int(token) in stop_ids or len(tokens) == cmd["new"]:
                break
        end = time.perf_counter()
        reply = {"ttft_s": first - start, "decode_s": end - first, "tokens": tokens}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
