"""KV pool sizing: how many blocks a byte budget holds, and the preemption mode a swap budget picks.

Used by ``promptcache engine serve`` (``--kv-cache-bytes``, ``--swap-space``) and ``promptcache
engine kv-size`` (``--budget``), so both refuse the same budgets with the same sentence. Reads only
a ``ModelConfig`` (config.json): no torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

from promptcache.errors import KVBudgetError

from .config import EngineConfig
from .model_config import DTYPE_BYTES, ModelConfig

__all__ = ["KVSize", "blocks_in_budget", "human_bytes", "kv_size", "size_kv_pools"]


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

    A block of the KV pool takes ``model_config.kv_bytes_per_token(config.kv_cache_dtype,
    config.dtype) * block_size`` bytes. ``swap_space``
    (bytes, 0 for none) > 0 preempts by swapping to a CPU pool of as many whole blocks as it
    holds (``preemption_mode="swap"``); 0 preempts by recompute. Sets ``config.preemption_mode``
    and ``config.num_cpu_blocks``.

    Raises:
        KVBudgetError: ``kv_cache_bytes`` or a non-zero ``swap_space`` holds no block
            (``setting`` says which).
    """
    per_block = (
        model_config.kv_bytes_per_token(config.kv_cache_dtype, config.dtype) * config.block_size
    )
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
    (a few bytes per layer) are not counted.
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


def kv_size(
    model_config: ModelConfig,
    *,
    tokens: int | None,
    batch: int,
    kv_dtype: str,
    budget: int,
    block_size: int,
    dtype: str = "auto",
) -> KVSize:
    """KV bytes per token, request and batch of a model, and what ``budget`` bytes hold.

    ``tokens`` per request (prompt + output) defaults to ``max_position_embeddings``; ``kv_dtype``
    is a ``--kv-cache-dtype`` value (``KV_CACHE_DTYPES``) and ``dtype`` a ``--dtype`` value
    (``DTYPES``), which gives the element type of an ``"auto"`` KV cache, as ``serve`` takes
    them (``ModelConfig.kv_element_dtype``). The budget is checked as
    ``serve`` checks ``kv_cache_bytes``.

    Raises:
        ConfigError: a ``block_size`` larger than the longest request ``serve`` would allow.
        KVBudgetError: ``budget`` holds no block (``setting="kv_cache_bytes"``).
    """
    # serve's rule: no block larger than max_model_len (serve's default: max_position_embeddings;
    # a request of --tokens needs at least that many).
    EngineConfig(
        block_size=block_size,
        max_model_len=max(model_config.max_position_embeddings, tokens or 0, 2),
    )
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
    )
