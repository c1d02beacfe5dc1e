"""The model every engine benchmark runs: a random-initialised Llama built here, plus helpers.

``build_model(dir)`` writes a Hugging Face Llama checkpoint (config.json + model.safetensors,
random weights from a fixed seed) with the tinystories tokenizer files beside it, so our loader,
our tokenizer and transformers all read the same directory. Default shape (about 26M
parameters): 8 layers, hidden 512, 8 query heads / 4 KV heads (GQA), head_dim 64, SwiGLU 1408,
vocab 2048, max_position_embeddings 2048. Weights use a larger init std than training does, so
the logits are peaked and greedy argmax is stable against float rounding: greedy tokens from
different kernels (ours, transformers' padded batch) then agree exactly and can be compared.

Shared helpers: ``median_time`` (our timer: medians over repeats), ``random_prompts`` (token
ids), ``machine()`` (one line describing where the numbers came from), ``print_table``.
"""

from __future__ import annotations

import os
import platform
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

TINYSTORIES = Path(__file__).resolve().parents[1] / ".." / "shared" / "models" / "tinystories-656k"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")

DEFAULT_SHAPE: dict[str, Any] = {
    "hidden_size": 512,
    "intermediate_size": 1408,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": 2048,
    "max_position_embeddings": 2048,
}


def build_model(directory: Path, *, seed: int = 0, init_std: float = 0.08, **shape: Any) -> Path:
    """Write a random Llama checkpoint to ``directory`` (created) and return it.

    Args:
        directory: where config.json, model.safetensors and the tokenizer files go.
        seed: torch seed of the weights.
        init_std: std of the normal init of every weight matrix (transformers' default 0.02
            gives nearly flat logits; 0.08 makes greedy decoding numerically robust).
        **shape: overrides of ``DEFAULT_SHAPE`` (LlamaConfig fields).
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    directory.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(
        **{**DEFAULT_SHAPE, **shape},
        initializer_range=init_std,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(directory, safe_serialization=True)
    for name in TOKENIZER_FILES:
        source = TINYSTORIES / name
        if not source.is_file():
            raise SystemExit(f"tokenizer file missing: {source}")
        shutil.copy(source, directory / name)
    return directory


def num_parameters(directory: Path) -> int:
    """Parameter count of the checkpoint (from the safetensors header, no weights loaded)."""
    from safetensors import safe_open

    total = 0
    with safe_open(str(directory / "model.safetensors"), framework="pt") as f:
        for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
            shape = f.get_slice(key).get_shape()
            count = 1
            for dim in shape:
                count *= dim
            total += count
    return total


def hf_model(directory: Path) -> Any:
    """transformers' ``LlamaForCausalLM`` on the same checkpoint (a directory or a GGUF file,
    dequantised by transformers), fp32, eval mode."""
    import torch
    from transformers import LlamaForCausalLM

    if directory.suffix == ".gguf":
        return LlamaForCausalLM.from_pretrained(
            directory.parent, gguf_file=directory.name, dtype=torch.float32
        ).eval()
    return LlamaForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()


def model_label(model: Path | None, directory: Path) -> str:
    """How the tables name the model: the ``--model`` file/directory, or the random Llama."""
    if model is not None:
        return f"{model.name} (--model), fp32"
    return f"random Llama, {num_parameters(directory) / 1e6:.1f}M parameters, fp32"


def add_model_option(parser: Any) -> None:
    """``--model``: a checkpoint directory or GGUF file instead of the random Llama."""
    parser.add_argument(
        "--model",
        type=Path,
        help="checkpoint directory or .gguf file (e.g. SmolLM2's); default: the random Llama",
    )


def random_prompts(
    count: int, lengths: Sequence[int], *, vocab: int = 2048, seed: int = 0
) -> list[list[int]]:
    """``count`` prompts of random token ids (3..vocab-1: no BOS/EOS/UNK), length per entry."""
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(lengths[i])] for i in range(count)]


def median_time(fn: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    """(median seconds, all timings) of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else ``platform.processor()``, else "unknown")."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> str:
    """Where the numbers were measured: CPU model, count and the vector ISA torch dispatches to
    (AVX2 / AVX512: whether oneDNN's bf16 GEMM is native decides the weight-only layers' dense
    path), torch threads, Python, torch version, load average."""
    import torch

    return (
        f"{platform.machine()} {cpu_model()}, {os.cpu_count()} CPUs, "
        f"{torch.backends.cpu.get_cpu_capability()} (torch threads {torch.get_num_threads()}), "
        f"{platform.system()}, Python {platform.python_version()}, torch {torch.__version__}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A Markdown table on stdout (pastes into docs/benchmarks.md as is)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def fail(message: str) -> None:
    """Report wrong engine output and exit non-zero."""
    print(f"WRONG OUTPUT: {message}", file=sys.stderr)
    raise SystemExit(1)
