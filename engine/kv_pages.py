"""KV pool storage whose pages become resident on first use, not at start-up.

``torch.zeros`` writes every byte of a tensor, so a CPU pool of ``kv_cache_bytes`` is resident
(in the process's RSS) from the start, whether or not a block is ever used. ``zeroed_pool``
takes the whole pool (every layer's K and V) from one private anonymous memory mapping
(``mmap(MAP_PRIVATE | MAP_ANONYMOUS)``): Linux maps every page of it to the shared zero page
until the page is first written, when it gets a page of its own, filled with zeros (mmap(2),
"MAP_ANONYMOUS: the mapping is not backed by any file; its contents are initialized to zero",
https://man7.org/linux/man-pages/man2/mmap.2.html, checked 2026-12-03). So the pool reads as
zeros exactly as ``torch.zeros``'s did, and holds in memory only the pages that K/V writes have
touched: a pool of 5,825 tokens that served 1,000 holds about 1,000 tokens' pages.

No value is ever uninitialised: a block reads as zeros until written, then holds the K/V of the
last sequence that wrote it, so every slot holds a finite number. That matters: the fused CPU
kernel reads a sequence's keys only below its context length, but the torch attention path
gathers whole blocks and gives the slots past the context an exact zero weight, which cancels a
finite value and not a NaN (0 x NaN = NaN). Neither the zeros nor another sequence's K/V in the
unwritten slots of a block reach an output: ``tests/engine/test_kv_pages.py`` fills every slot
with large random values before a run and compares the outputs bit for bit.

On devices other than the CPU (CUDA memory is not paged in this way), and where Python's
``mmap`` has no ``MAP_ANONYMOUS`` (Windows), the pool is ``torch.zeros``.
"""

from __future__ import annotations

import math
import mmap

import torch

__all__ = ["lazily_zeroed", "zeroed_pool"]


def lazily_zeroed(nbytes: int) -> bool:
    """Whether a CPU pool of ``nbytes`` bytes is mapped lazily here (see the module docstring)."""
    return nbytes > 0 and hasattr(mmap, "MAP_ANONYMOUS") and hasattr(mmap, "MAP_PRIVATE")


def zeroed_pool(
    num_layers: int, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``num_layers`` ``(k, v)`` pairs of zero tensors of ``shape`` and ``dtype`` on ``device``.

    On the CPU the pairs are views of one anonymous mapping, resident page by page as they are
    written; elsewhere they are ``torch.zeros``. Each tensor is contiguous and has its own
    region (they never overlap).

    Raises:
        RuntimeError, MemoryError, OSError: the allocation failed (the caller turns these into
            a ``ConfigError`` naming its setting).
    """
    per_tensor = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    total = 2 * num_layers * per_tensor
    if device.type != "cpu" or not lazily_zeroed(total):
        return [
            (
                torch.zeros(shape, dtype=dtype, device=device),
                torch.zeros(shape, dtype=dtype, device=device),
            )
            for _ in range(num_layers)
        ]
    region = mmap.mmap(
        -1,
        total,
        flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
        prot=mmap.PROT_READ | mmap.PROT_WRITE,
    )
    # torch.frombuffer keeps a reference to the mapping, so it lives as long as any view of it.
    flat = torch.frombuffer(region, dtype=torch.uint8)
    tensors = [
        flat[i * per_tensor : (i + 1) * per_tensor].view(dtype).view(shape)
        for i in range(2 * num_layers)
    ]
    return [(tensors[2 * i], tensors[2 * i + 1]) for i in range(num_layers)]
