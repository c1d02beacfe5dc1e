"""Triton GPU kernels for the engine: paged decode attention, extend attention, KV store.

Each kernel has a plain-torch twin in :mod:`promptcache.kernels.reference`. The kernels run on
CUDA tensors; on the CPU they run only under the Triton interpreter (``TRITON_INTERPRET=1`` set
before this package is imported), which is how the tests check them without a GPU.
See docs/kernels.md for the design and the measured error bounds.
"""

from __future__ import annotations

from .extend_attention import extend_attention
from .paged_decode import paged_decode_attention
from .store_kv import store_kv

__all__ = ["extend_attention", "paged_decode_attention", "store_kv"]
