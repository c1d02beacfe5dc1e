"""Triton GPU kernels for the engine: paged decode attention, extend attention, KV store.

Each kernel has a plain-torch twin in :mod:`promptcache.kernels.reference`. The kernels run on
CUDA tensors; on the CPU they run only under the Triton interpreter (``TRITON_INTERPRET=1`` set
before this package is imported), which is how the tests check them without a GPU.
See docs/kernels.md for the design and the measured error bounds.
"""

from __future__ import annotations

from ._checks import is_interpreted
from .extend_attention import extend_attention
from .launch import LaunchConfig
from .paged_decode import paged_decode_attention
from .store_kv import _store_kv_kernel, store_kv

__all__ = ["LaunchConfig", "extend_attention", "paged_decode_attention", "runs_on_cpu", "store_kv"]


def runs_on_cpu() -> bool:
    """True when these kernels run on CPU tensors: the Triton interpreter is on.

    ``TRITON_INTERPRET=1`` must be set before this package is first imported; whether it was is
    read from a compiled kernel, so the answer agrees with what the kernels will do. False means
    they run only on CUDA tensors.
    """
    return is_interpreted(_store_kv_kernel)
