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


def _pool_bytes_per_block(runner: object) -> int:
    """Bytes of one block of a runner's real KV pool: every layer's K and V tensors' nbytes
    divided by the blocks they hold."""
    caches = runner.kv_caches  # type: ignore[attr-defined]
    total = sum(t.nbytes for layer in caches for t in (layer.k_cache, layer.v_cache))
    return int(total // runner.num_blocks)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "engine_args"),
    [
        ((), {}),  # auto: float16 where the fused kernel serves
        (("--no-fused-cpu-decode",), {"fused_cpu_decode": False}),  # auto: the model dtype
    ],
)
def test_kv_size_prints_the_bytes_of_the_pool_the_engine_allocates(
    tinystories_dir: Path, options: tuple[str, ...], engine_args: dict[str, object]
) -> None:
    """kv-size's bytes per token (printed, --kv-cache-dtype auto) against the tensors of the
    pool `LLM(...)` allocates with the same settings, and the swap pool sized in those bytes."""
    import torch
    from click.testing import CliRunner

    from promptcache.cli import cli
    from promptcache.engine import LLM

    result = CliRunner().invoke(
        cli,
        ["engine", "kv-size", "--model", str(tinystories_dir), "--weight-dtype", "int4", *options],
    )
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("per token"))
    printed = int(line.split("=")[-1].split("B")[0].replace(",", ""))
    llm = LLM(tinystories_dir, weight_dtype="int4", num_blocks=4, **engine_args)  # type: ignore[arg-type]
    runner = llm.engine.runner
    assert _pool_bytes_per_block(runner) == printed * runner.block_size
    fused = runner.fused_decode is not None
    assert ("fused kernel  would serve" in result.output) == fused
    assert runner.kv_dtype == (torch.float16 if fused else torch.float32)
    # serve's swap pool: whole blocks of the same bytes
    config = EngineConfig(weight_dtype="int4", kv_cache_bytes=printed * 16, **engine_args)  # type: ignore[arg-type]
    size_kv_pools(config, ModelConfig.from_pretrained(tinystories_dir), swap_space=printed * 16 * 5)
    assert config.num_cpu_blocks == 5


@pytest.mark.parametrize(
    ("options", "why"),
    [
        # a checkpoint directory's float weights: EngineConfig's "auto", which the line used to
        # print as "weight_dtype is 'auto', not 'int4'", also for an explicit --weight-dtype float
        ((), "would not serve: the weights are float, not int4 (--weight-dtype int4 quantises"),
        (("--weight-dtype", "float"), "would not serve: the weights are float, not int4"),
        (("--weight-dtype", "int8"), "would not serve: the weights are int8, not int4"),
        (("--weight-dtype", "int4", "--no-fused-cpu-decode"), "would not serve: turned off"),
    ],
)
def test_kv_size_says_why_the_fused_kernel_would_not_serve(
    tinystories_dir: Path, options: tuple[str, ...], why: str
) -> None:
    from click.testing import CliRunner

    from promptcache.cli import cli

    result = CliRunner().invoke(
        cli, ["engine", "kv-size", "--model", str(tinystories_dir), *options]
    )
    assert result.exit_code == 0, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("fused kernel")]
    assert line.startswith(f"fused kernel  {why}"), line
