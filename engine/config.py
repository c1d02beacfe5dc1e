"""Engine configuration: one validated dataclass shared by the runner, scheduler and server.

`EngineConfig` holds what the user chooses (model path, memory budget, batching limits, cache
policy). Values the engine derives at start-up (the number of KV blocks that fit the byte budget,
the model's end-of-sequence ids) are passed to the scheduler explicitly, not written back here.

Every bad value raises `promptcache.errors.ConfigError` naming the field and the fix; nothing is
checked with `assert`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from promptcache.errors import ConfigError

from .spec_decode.config import SpeculativeConfig

__all__ = [
    "ATTENTION_BACKENDS",
    "DTYPES",
    "KV_CACHE_DTYPES",
    "WEIGHT_DTYPES",
    "EngineConfig",
    "PreemptionMode",
]

PreemptionMode = Literal["recompute", "swap"]
"""How the scheduler frees KV blocks when the pool runs out: drop and recompute, or copy to CPU."""

DTYPES = ("auto", "float32", "float16", "bfloat16")
"""Model weight/activation dtypes. "auto" = the checkpoint's torch_dtype (float32 on CPU)."""

WEIGHT_DTYPES = ("auto", "int8", "int4")
"""Storage of the linear layers' weights. "auto" = the model dtype (`dtype`); int8 / int4 =
weight-only quantised CPU kernels (engine/models/quant_linear.py): fewer bytes read per decoded
token, logits no longer bit-equal to the float model's."""

KV_CACHE_DTYPES = ("auto", "float16", "float32", "int8", "fp8")
"""KV pool element types, taken by `serve` and `kv-size` alike. "auto" = float16 where the fused
CPU kernel serves, else the model dtype (`dtype`); int8/fp8 store per-kv-head scaled values.
`kv_sizing.resolve_kv_cache_dtype` resolves "auto" for the runner, `kv-size` and the swap pool's
sizing alike, `ModelConfig.kv_element_dtype` names the element type and
`ModelConfig.kv_bytes_per_token` is the one bytes-per-token formula."""

ATTENTION_BACKENDS = ("torch", "triton")
"""Names accepted by `promptcache.engine.attention.get_backend`."""

_MIB = 1024 * 1024
_DEVICE = re.compile(r"^(cpu|cuda)(:\d+)?$")
"""Devices the engine runs on. Others torch knows ("meta", "mps", "xpu"...) are refused up
front: "meta" holds no data, and the engine's kernels and tests cover only CPU and CUDA."""
_MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes at most 64 bits


@dataclass(slots=True)
class EngineConfig:
    """Everything the engine needs to know before it loads a model.

    Attributes:
        model: local checkpoint directory (or hub id, resolved by the loader).
        dtype: weight/activation dtype, one of `DTYPES`.
        weight_dtype: storage of the linear layers' weights, one of `WEIGHT_DTYPES` ("auto" =
            `dtype`; "int8" / "int4" = weight-only quantised, CPU only).
        device: "cpu", "cuda" or "cuda:<index>" (other torch devices are refused).
        seed: global seed for weight-free randomness (per-request seeds live in SamplingParams).
        max_model_len: longest sequence (prompt + output) in tokens; None = the checkpoint's
            `max_position_embeddings` (filled in by the engine at load time).
        block_size: tokens per KV block (default 16, as vLLM); at most `max_model_len`.
        kv_cache_bytes: byte budget for the whole KV pool (all layers, K and V); the runner
            derives the number of blocks from it. Ignored when `num_blocks` is set.
        num_blocks: fixed number of KV blocks, overriding `kv_cache_bytes` (tests use tiny pools).
        kv_cache_dtype: KV pool element type, one of `KV_CACHE_DTYPES`; "auto" is float16
            where the fused CPU kernel runs (`fused_cpu_decode`), else the model's dtype.
        max_num_seqs: most sequences in one step's batch (running sequences at once).
        max_num_batched_tokens: token budget per step: the sum of new tokens (prefill chunks +
            one per decode) scheduled in one forward pass.
        enable_chunked_prefill: split long prompts over several steps to fit the token budget.
            When False, a prompt is scheduled whole, so `max_num_batched_tokens` must be at
            least `max_model_len`.
        enable_prefix_caching: reuse full KV blocks whose chained hash matches (vLLM-style APC).
        preemption_mode: "recompute" (free the blocks, recompute later; cached prefixes make
            that cheap) or "swap" (copy the blocks to a CPU pool of `num_cpu_blocks`).
        num_cpu_blocks: size of the CPU swap pool in blocks; must be > 0 for "swap".
        cache_aware_scheduling: admit the waiting request with the longest cached prefix first
            (SGLang's longest-prefix-match); False = first come, first served.
        fairness_max_wait_steps: a waiting request older than this many steps is admitted in
            arrival order before any cache-aware pick, so no request starves.
        attention_backend: one of `ATTENTION_BACKENDS`.
        fused_cpu_decode: run every forward pass (prefill chunks and decode steps) through
            the compiled C kernel of `engine/cpu_decode` (every layer in one call; the name is
            from when it ran decode steps only). None = when it can run here (an AVX2 + FMA +
            F16C CPU, a C compiler, a float32 model and a float16 or float32 KV pool,
            `weight_dtype="int4"` on a Llama model without biases or sliding windows), else
            the torch path; True = require it (ConfigError at load saying why it cannot run);
            False = never.
        kv_ram_bytes: byte budget of the host-RAM cache tier (0 = none): cached blocks the
            pool evicts are copied there, and a prefix match goes on there after a pool miss
            (`promptcache.engine.kv_tiers`). Needs prefix caching.
        kv_disk_dir: directory of the disk cache tier (None = none): blocks the RAM tier (or,
            without one, the pool) evicts, and at close every cached block, are written there,
            and a restarted engine with the same model and KV settings finds them.
        kv_disk_bytes: byte budget of the disk tier's block files (least recently used out).
        speculative_config: prompt-lookup speculative decoding, vLLM's ``speculative_config``
            (a `SpeculativeConfig`, a dict such as ``{"method": "ngram",
            "num_speculative_tokens": 4, "prompt_lookup_max": 3}``, or that as JSON); stored
            as a `SpeculativeConfig` once validated. None = off.

    Raises:
        ConfigError: on any invalid value (message names the field and what to change).
    """

    model: str = ""
    dtype: str = "auto"
    weight_dtype: str = "auto"
    device: str = "cpu"
    seed: int = 0
    max_model_len: int | None = None
    block_size: int = 16
    kv_cache_bytes: int = 256 * _MIB
    num_blocks: int | None = None
    kv_cache_dtype: str = "auto"
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    preemption_mode: PreemptionMode = "recompute"
    num_cpu_blocks: int = 0
    cache_aware_scheduling: bool = True
    fairness_max_wait_steps: int = 32
    attention_backend: str = "torch"
    fused_cpu_decode: bool | None = None
    kv_ram_bytes: int = 0
    kv_disk_dir: str | None = None
    kv_disk_bytes: int = 16 * 1024 * _MIB
    speculative_config: SpeculativeConfig | dict[str, Any] | str | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field; call again after changing fields (e.g. filling `max_model_len`).

        Raises:
            ConfigError: the first invalid field, with the accepted range.
        """
        _check_choice("dtype", self.dtype, DTYPES)
        _check_choice("weight_dtype", self.weight_dtype, WEIGHT_DTYPES)
        _check_choice("kv_cache_dtype", self.kv_cache_dtype, KV_CACHE_DTYPES)
        _check_choice("attention_backend", self.attention_backend, ATTENTION_BACKENDS)
        _check_choice("preemption_mode", self.preemption_mode, get_args(PreemptionMode))
        if self.fused_cpu_decode is not None and not isinstance(self.fused_cpu_decode, bool):
            raise ConfigError(
                f"fused_cpu_decode must be None (when it can run), True or False, got "
                f"{self.fused_cpu_decode!r}"
            )
        if self.fused_cpu_decode:
            # What the config alone rules out, before a model is loaded (the rest is checked by
            # FusedDecode.build at load: CPU, compiler, architecture).
            conflicts = [
                f"{name}={value!r}"
                for name, value, ok in (
                    ("weight_dtype", self.weight_dtype, self.weight_dtype == "int4"),
                    ("dtype", self.dtype, self.dtype in ("auto", "float32")),
                    (
                        "kv_cache_dtype",
                        self.kv_cache_dtype,
                        self.kv_cache_dtype in ("auto", "float16", "float32"),
                    ),
                    ("device", self.device, self.device.startswith("cpu")),
                )
                if not ok
            ]
            if conflicts:
                raise ConfigError(
                    f"fused_cpu_decode=True (--fused-cpu-decode) needs weight_dtype='int4', a "
                    f"float32 model and a float16 or float32 KV pool on the CPU; got "
                    f"{', '.join(conflicts)}"
                )
        if not isinstance(self.model, str):
            raise ConfigError(f"model must be a path string, got {type(self.model).__name__}")
        if not isinstance(self.device, str) or not _DEVICE.match(self.device):
            raise ConfigError(
                f"device must be 'cpu', 'cuda' or 'cuda:<index>' (the engine runs on CPUs and "
                f"CUDA GPUs only), got {self.device!r}"
            )
        _check_int("seed", self.seed, minimum=0)
        if self.seed > _MAX_SEED:
            raise ConfigError(f"seed must be <= {_MAX_SEED} (an int64), got {self.seed}")
        _check_int("block_size", self.block_size, minimum=1)
        _check_int("kv_cache_bytes", self.kv_cache_bytes, minimum=1)
        _check_int("max_num_seqs", self.max_num_seqs, minimum=1)
        _check_int("max_num_batched_tokens", self.max_num_batched_tokens, minimum=1)
        _check_int("num_cpu_blocks", self.num_cpu_blocks, minimum=0)
        _check_int("fairness_max_wait_steps", self.fairness_max_wait_steps, minimum=0)
        if self.max_model_len is not None:
            _check_int("max_model_len", self.max_model_len, minimum=2)
            if self.block_size > self.max_model_len:
                raise ConfigError(
                    f"block_size={self.block_size} is larger than max_model_len="
                    f"{self.max_model_len}: no sequence could ever fill a block, so the prefix "
                    "cache would never hit and most of each block would be wasted; lower "
                    f"block_size to {self.max_model_len} or less (--block-size), or raise "
                    "max_model_len"
                )
        if self.num_blocks is not None:
            _check_int("num_blocks", self.num_blocks, minimum=1)
        if self.speculative_config is not None:
            self.speculative_config = SpeculativeConfig.parse(self.speculative_config)
        _check_int("kv_ram_bytes", self.kv_ram_bytes, minimum=0)
        _check_int("kv_disk_bytes", self.kv_disk_bytes, minimum=1)
        if self.kv_disk_dir is not None and (
            not isinstance(self.kv_disk_dir, str) or not self.kv_disk_dir
        ):
            raise ConfigError(f"kv_disk_dir must be a directory path, got {self.kv_disk_dir!r}")
        if (self.kv_ram_bytes or self.kv_disk_dir is not None) and not self.enable_prefix_caching:
            raise ConfigError(
                "kv_ram_bytes / kv_disk_dir (--kv-ram / --kv-disk) hold prefix-cache blocks and "
                "need enable_prefix_caching=True"
            )
        for name in ("enable_chunked_prefill", "enable_prefix_caching", "cache_aware_scheduling"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false")
        if self.weight_dtype != "auto" and not self.device.startswith("cpu"):
            raise ConfigError(
                f"weight_dtype={self.weight_dtype!r} runs torch's CPU weight-only kernels; "
                f"use weight_dtype='auto' on device={self.device!r}"
            )
        if self.preemption_mode == "swap" and self.num_cpu_blocks == 0:
            raise ConfigError(
                "preemption_mode='swap' needs a CPU pool: set num_cpu_blocks > 0 "
                "or use preemption_mode='recompute'"
            )
        if (
            not self.enable_chunked_prefill
            and self.max_model_len is not None
            and self.max_num_batched_tokens < self.max_model_len
        ):
            raise ConfigError(
                f"max_num_batched_tokens={self.max_num_batched_tokens} is below "
                f"max_model_len={self.max_model_len} with chunked prefill off, so a long prompt "
                "could never be scheduled: raise max_num_batched_tokens or enable chunked prefill"
            )

    def max_blocks_per_seq(self) -> int:
        """Blocks needed by one sequence of `max_model_len` tokens (block-table width).

        Raises:
            ConfigError: if `max_model_len` is still None (the engine fills it at load time).
        """
        if self.max_model_len is None:
            raise ConfigError("max_model_len is not set yet; set it or load the model first")
        return -(-self.max_model_len // self.block_size)


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
