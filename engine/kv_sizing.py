"""KV pool sizing: how many blocks a byte budget holds, and the preemption mode a swap budget picks.

Used by ``promptcache engine serve`` (``--kv-cache-bytes``, ``--swap-space``) and ``promptcache
engine kv-size`` (``--budget``), so both refuse the same budgets with the same sentence. Reads only
a ``ModelConfig`` (config.json): no torch here.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from promptcache.errors import KVBudgetError

from .config import EngineConfig
from .model_config import DTYPE_BYTES, ModelConfig

__all__ = [
    "KVSize",
    "blocks_in_budget",
    "fused_kernel_unavailable",
    "human_bytes",
    "kv_size",
    "resolve_kv_cache_dtype",
    "size_kv_pools",
]

#: CPU flags (``/proc/cpuinfo``) the fused kernel's instructions need (``cpu_decode.library``).
KERNEL_CPU_FLAGS = ("avx2", "fma", "f16c")


def resolve_kv_cache_dtype(kv_cache_dtype: str, *, fused_kernel: bool) -> str:
    """The ``kv_cache_dtype`` the KV pool really gets: ``"auto"`` is ``"float16"`` where the
    fused CPU kernel serves (``fused_kernel``), else it stays ``"auto"`` (the model dtype);
    every other name is returned as is.

    The one rule for the runner (which allocates the pool), ``kv_size`` and ``size_kv_pools``.
    """
    return "float16" if kv_cache_dtype == "auto" and fused_kernel else kv_cache_dtype


def _cpu_flags() -> set[str]:
    """The flags of the first CPU in ``/proc/cpuinfo`` (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def _has_compiler() -> bool:
    """Whether ``$CC`` (its first word) or one of cc / gcc / clang is on ``PATH``, as
    ``cpu_decode.library`` looks for it."""
    cc = shlex.split(os.environ.get("CC", ""))
    if cc:
        return shutil.which(cc[0]) is not None
    return any(shutil.which(name) for name in ("cc", "gcc", "clang"))


def fused_kernel_unavailable(config: EngineConfig, model_config: ModelConfig) -> str | None:
    """Why the fused CPU kernel would not serve ``model_config`` with ``config``, from the
    settings, config.json and this machine, without torch; None = it would.

    The same conditions ``FusedDecode.check`` tests on a loaded model: not turned off, the
    CPU, ``weight_dtype="int4"``, a float32 model, no biases on the projections, no sliding
    window, ``head_dim`` a multiple of 16, a CPU with AVX2, FMA and F16C, a C compiler. A build
    of the kernel that then fails is not foreseen here (the runner falls back to the torch path
    and the model dtype's pool).
    """
    if config.fused_cpu_decode is False:
        return "turned off (--no-fused-cpu-decode)"
    if not config.device.startswith("cpu"):
        return f"the device is {config.device}, not the CPU"
    if config.weight_dtype == "auto":
        # EngineConfig's "auto" is weights in the model dtype: what --weight-dtype auto chose
        # for float weights (a GGUF file of 4-bit weights is int4 by then)
        return "the weights are float, not int4 (--weight-dtype int4 quantises them)"
    if config.weight_dtype != "int4":
        return f"the weights are {config.weight_dtype}, not int4 (--weight-dtype int4)"
    dtype = model_config.kv_element_dtype("auto", config.dtype)
    if dtype != "float32":
        return f"the model runs in {dtype}, not float32"
    if model_config.qkv_bias or model_config.o_bias or model_config.mlp_bias:
        return "the model's projections have biases"
    if any(w is not None for w in model_config.sliding_windows):
        return "the model uses a sliding attention window"
    if model_config.head_dim % 16:
        return f"head_dim {model_config.head_dim} is not a multiple of 16"
    missing = [flag for flag in KERNEL_CPU_FLAGS if flag not in _cpu_flags()]
    if missing:
        return f"this CPU lacks {', '.join(missing).upper()}"
    if not _has_compiler():
        return "no C compiler (set $CC, or install gcc or clang)"
    return None


def human_bytes(n: int) -> str:
    """``n`` bytes as ``"16,384 B (16.00 KiB)"`` (binary units from KiB up; bytes below)."""
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n:,} B ({n / size:.2f} {unit})"
    return f"{n:,} B"


def blocks_in_budget(budget: int, bytes_per_block: int, block_size: int, setting: str) -> int:
    """How many whole KV blocks ``budget`` bytes hold (``budget // bytes_per_block``).

    Args:
        budget: bytes to fill.
        bytes_per_block: bytes of one block (K and V, every layer, ``block_size`` tokens).
        block_size: tokens per block (for the message).
        setting: the budget's name, ``"kv_cache_bytes"`` or ``"swap_space"`` (copied to the error).

    Raises:
        KVBudgetError: the budget holds no block (the engine would refuse to start).
    """
    blocks = budget // bytes_per_block
    if blocks < 1:
        raise KVBudgetError(
            f"{human_bytes(budget)} holds no KV block ({block_size} tokens = "
            f"{bytes_per_block:,} B for this model); give at least {bytes_per_block:,} bytes",
            setting=setting,
        )
    return blocks


def size_kv_pools(config: EngineConfig, model_config: ModelConfig, *, swap_space: int) -> None:
    """Check ``config.kv_cache_bytes`` against the model, and set the CPU swap pool in ``config``.

    A block of the KV pool takes ``model_config.kv_bytes_per_token(kv, config.dtype) *
    block_size`` bytes, ``kv`` being the dtype the pool gets (``resolve_kv_cache_dtype``: float16
    for ``"auto"`` where the fused CPU kernel serves). ``swap_space``
    (bytes, 0 for none) > 0 preempts by swapping to a CPU pool of as many whole blocks as it
    holds (``preemption_mode="swap"``); 0 preempts by recompute. Sets ``config.preemption_mode``
    and ``config.num_cpu_blocks``.

    Raises:
        KVBudgetError: ``kv_cache_bytes`` or a non-zero ``swap_space`` holds no block
            (``setting`` says which).
    """
    kv = resolve_kv_cache_dtype(
        config.kv_cache_dtype, fused_kernel=fused_kernel_unavailable(config, model_config) is None
    )
    per_block = model_config.kv_bytes_per_token(kv, config.dtype) * config.block_size
    blocks_in_budget(config.kv_cache_bytes, per_block, config.block_size, "kv_cache_bytes")
    num_cpu_blocks = (
        blocks_in_budget(swap_space, per_block, config.block_size, "swap_space")
        if swap_space
        else 0
    )
    config.preemption_mode = "swap" if num_cpu_blocks else "recompute"
    config.num_cpu_blocks = num_cpu_blocks


@dataclass(frozen=True)
class KVSize:
    """KV cache arithmetic for one model (all sizes in bytes, lengths in tokens).

    ``bytes_per_token = 2 (K and V) x layers x kv_heads x head_dim x bytes_per_element``; the
    engine allocates whole blocks of ``block_size`` tokens, so a budget holds
    ``budget // (bytes_per_token x block_size)`` blocks. Per-head scales of an int8/fp8 cache
    (a few bytes per layer) are not counted. ``fused_kernel_unavailable``: why the fused CPU
    kernel would not serve (``fused_kernel_unavailable()``), None where it would.
    """

    layers: int
    kv_heads: int
    head_dim: int
    kv_dtype: str
    bytes_per_element: int
    bytes_per_token: int
    tokens: int
    batch: int
    bytes_per_request: int
    bytes_per_batch: int
    budget: int
    block_size: int
    budget_blocks: int
    budget_tokens: int
    budget_requests: int
    fused_kernel_unavailable: str | None = None


def kv_size(
    model_config: ModelConfig,
    *,
    tokens: int | None,
    batch: int,
    kv_dtype: str,
    budget: int,
    block_size: int,
    dtype: str = "auto",
    weight_dtype: str = "auto",
    fused_cpu_decode: bool | None = None,
) -> KVSize:
    """KV bytes per token, request and batch of a model, and what ``budget`` bytes hold.

    ``tokens`` per request (prompt + output) defaults to ``max_position_embeddings``; ``kv_dtype``
    is a ``--kv-cache-dtype`` value (``KV_CACHE_DTYPES``) and ``dtype`` a ``--dtype`` value
    (``DTYPES``), which gives the element type of an ``"auto"`` KV cache, as ``serve`` takes
    them (``ModelConfig.kv_element_dtype``), except where ``"auto"`` is float16: where the
    fused CPU kernel would serve (``weight_dtype`` an ``EngineConfig.weight_dtype`` value,
    ``fused_cpu_decode`` as ``serve --fused-cpu-decode``; ``resolve_kv_cache_dtype``). The
    budget is checked as ``serve`` checks ``kv_cache_bytes``.

    Raises:
        ConfigError: a ``block_size`` larger than the longest request ``serve`` would allow.
        KVBudgetError: ``budget`` holds no block (``setting="kv_cache_bytes"``).
    """
    # serve's rule: no block larger than max_model_len (serve's default: max_position_embeddings;
    # a request of --tokens needs at least that many).
    config = EngineConfig(
        block_size=block_size,
        max_model_len=max(model_config.max_position_embeddings, tokens or 0, 2),
        dtype=dtype,
        weight_dtype=weight_dtype,
        fused_cpu_decode=fused_cpu_decode,
    )
    why_not = fused_kernel_unavailable(config, model_config)
    kv_dtype = resolve_kv_cache_dtype(kv_dtype, fused_kernel=why_not is None)
    per_token = model_config.kv_bytes_per_token(kv_dtype, dtype)
    blocks_in_budget(budget, per_token * block_size, block_size, "kv_cache_bytes")
    tokens = tokens or model_config.max_position_embeddings
    name = model_config.kv_element_dtype(kv_dtype, dtype)
    blocks = budget // (per_token * block_size)
    return KVSize(
        layers=model_config.num_hidden_layers,
        kv_heads=model_config.num_key_value_heads,
        head_dim=model_config.head_dim,
        kv_dtype=name,
        bytes_per_element=DTYPE_BYTES[name],
        bytes_per_token=per_token,
        tokens=tokens,
        batch=batch,
        bytes_per_request=per_token * tokens,
        bytes_per_batch=per_token * tokens * batch,
        budget=budget,
        block_size=block_size,
        budget_blocks=blocks,
        budget_tokens=blocks * block_size,
        budget_requests=blocks // -(-tokens // block_size),
        fused_kernel_unavailable=why_not,
    )
