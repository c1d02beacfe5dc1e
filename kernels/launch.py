"""Launch configurations of the attention kernels: tile sizes, warps, pipeline stages.

A `LaunchConfig` names what a kernel's launch may vary without changing its result: the tokens
per key tile (``block_n``), the query rows per program (``block_m``, extend only), the warps per
program and Triton's software-pipelining depth, plus, for paged decode, how many programs per
streaming multiprocessor the split-KV heuristic aims at. Every configuration computes the same
function; rounding differs only through the order of the online-softmax steps, which follows
``block_n``.

The defaults are the configurations with the best geometric mean of time over the shapes of
``benchmarks/kernels_gpu.py --sweep all`` on an NVIDIA H200 (36 decode and 36 extend
configurations; docs/benchmarks.md, "GPU kernels"). They are fixed, not autotuned: the same code
runs under the Triton interpreter, which has no CUDA timing.
"""

from __future__ import annotations

from dataclasses import dataclass

from promptcache.errors import KernelInputError

__all__ = ["DECODE_LAUNCH", "EXTEND_LAUNCH", "LaunchConfig", "check_launch"]

_WARPS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class LaunchConfig:
    """How one attention kernel is launched.

    Attributes:
        block_n: key tokens per tile, a power of two in 16..256.
        num_warps: warps per program, one of 1, 2, 4, 8, 16.
        num_stages: Triton's software-pipelining depth, 1..6.
        block_m: query rows per program (extend attention; paged decode ignores it), a power
            of two in 16..256.
        programs_per_sm: paged decode's split-KV target, programs per streaming
            multiprocessor (see `promptcache.kernels.paged_decode.choose_num_splits`), 1..64.
    """

    block_n: int
    num_warps: int
    num_stages: int
    block_m: int = 64
    programs_per_sm: int = 2


DECODE_LAUNCH = LaunchConfig(block_n=64, num_warps=4, num_stages=2, programs_per_sm=8)
"""Paged decode's default launch."""

EXTEND_LAUNCH = LaunchConfig(block_n=64, num_warps=4, num_stages=2, block_m=128)
"""Extend attention's default launch."""


def _power_of_two(value: object, low: int, high: int) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and low <= value <= high
        and value & (value - 1) == 0
    )


def check_launch(launch: object) -> LaunchConfig:
    """Return ``launch`` if it is a valid `LaunchConfig`.

    Raises:
        KernelInputError: not a `LaunchConfig`, or a field out of its range (the message names
            the field and the values it may take).
    """
    if not isinstance(launch, LaunchConfig):
        raise KernelInputError(f"launch must be a LaunchConfig, got {type(launch).__name__}")
    for name in ("block_n", "block_m"):
        if not _power_of_two(getattr(launch, name), 16, 256):
            raise KernelInputError(
                f"launch.{name} must be a power of two in 16..256, got {getattr(launch, name)!r}"
            )
    if launch.num_warps not in _WARPS or isinstance(launch.num_warps, bool):
        raise KernelInputError(
            f"launch.num_warps must be one of {_WARPS}, got {launch.num_warps!r}"
        )
    for name, high in (("num_stages", 6), ("programs_per_sm", 64)):
        value = getattr(launch, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise KernelInputError(f"launch.{name} must be an int in 1..{high}, got {value!r}")
    return launch
