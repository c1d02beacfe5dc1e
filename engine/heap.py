"""glibc's malloc under the CPU engine: buffers of 1 MiB or more go back to the OS when freed.

glibc serves an allocation of at least ``M_MMAP_THRESHOLD`` bytes with a mapping of its own,
unmapped when freed; smaller ones come from the heap, whose freed pages stay resident until
``malloc_trim``. The threshold starts at 128 KiB and, by default, rises each time such a mapping
is freed to the size freed, up to 32 MiB on 64-bit systems (mallopt(3), ``M_MMAP_THRESHOLD``:
"the threshold is adjusted upward to the size of the freed chunk"; setting it turns that off;
https://man7.org/linux/man-pages/man3/mallopt.3.html, checked 2026-12-03). The load frees
multi-MB copies, so the threshold had risen past the temporaries of a prefill pass (a
2,048-token pass of SmolLM2: 4.7 MB each for the hidden states, the embedding's rows, the
final norm), which then came from the heap and stayed resident once freed: 18 MiB of
SmolLM2's RSS after serving went back to the OS with ``malloc_trim``, and the load's
temporaries raised its peak (2026-12-03, docs/engine.md#memory).

``unmap_large_allocations`` fixes the threshold at ``MMAP_THRESHOLD``, for the whole process
(it is a property of the C library, not of one engine). Below it, decode steps' buffers (one
row's logits: 196 KB for a 49,152-token vocabulary) stay on the heap and are reused; a mapping
costs its page faults when first written (about 0.3 ms per MB), against passes that run for
tens of milliseconds per MB they allocate.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["MMAP_THRESHOLD", "unmap_large_allocations"]

MMAP_THRESHOLD = 1 << 20
"""Bytes from which glibc maps an allocation on its own (``M_MMAP_THRESHOLD``)."""

_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def unmap_large_allocations() -> bool:
    """Fix glibc's ``M_MMAP_THRESHOLD`` at ``MMAP_THRESHOLD`` for this process.

    Returns:
        Whether it was set: False where the C library has no ``mallopt`` (musl, macOS) or
        refuses the value.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
