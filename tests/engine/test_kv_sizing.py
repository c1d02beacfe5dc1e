"""engine.kv_sizing: the KV pool and swap pool sizes serve starts with, against hand counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptcache.engine.config import EngineConfig
from promptcache.engine.kv_sizing import size_kv_pools
from promptcache.engine.model_config import ModelConfig
from promptcache.errors import KVBudgetError


def _per_block(model_dir: Path, block_size: int) -> int:
    """Bytes of one float32 KV block, counted from config.json (2 x layers x kv heads x dim x 4)."""
    raw = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    kv_heads = raw.get("num_key_value_heads", raw["num_attention_heads"])
    head_dim = raw.get("head_dim") or raw["hidden_size"] // raw["num_attention_heads"]
    return 2 * raw["num_hidden_layers"] * kv_heads * head_dim * 4 * block_size


def test_a_swap_budget_picks_swap_with_its_whole_blocks(tinystories_dir: Path) -> None:
    per_block = _per_block(tinystories_dir, 16)
    model = ModelConfig.from_pretrained(tinystories_dir)
    config = EngineConfig(dtype="float32", block_size=16, kv_cache_bytes=per_block)
    size_kv_pools(config, model, swap_space=3 * per_block + per_block // 2)
    assert (config.preemption_mode, config.num_cpu_blocks) == ("swap", 3)
    size_kv_pools(config, model, swap_space=0)
    assert (config.preemption_mode, config.num_cpu_blocks) == ("recompute", 0)


@pytest.mark.parametrize(
    ("kv", "swap", "setting"), [(-1, 0, "kv_cache_bytes"), (0, 1, "swap_space")]
)
def test_a_budget_below_one_block_names_its_setting(
    tinystories_dir: Path, kv: int, swap: int, setting: str
) -> None:
    per_block = _per_block(tinystories_dir, 16)
    model = ModelConfig.from_pretrained(tinystories_dir)
    config = EngineConfig(dtype="float32", block_size=16, kv_cache_bytes=per_block + kv)
    with pytest.raises(KVBudgetError, match=f"give at least {per_block:,} bytes") as caught:
        size_kv_pools(config, model, swap_space=swap)
    assert caught.value.setting == setting
