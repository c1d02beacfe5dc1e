"""``heap.unmap_large_allocations``: after it, a freed buffer of 1 MiB or more leaves the RSS.

Run in a child process (the setting is process-wide). The child first frees a 16 MiB buffer,
which by glibc's default raises its mmap threshold to 16 MiB (the state the engine's load
leaves), then allocates a 4 MiB buffer: without the fixed threshold it comes from the heap
(``mallinfo2``'s ``hblkhd``, the bytes in mappings of their own, does not grow) and stays
resident once freed; with it, it is a mapping of its own, unmapped when freed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CHILD = r"""
import ctypes, json, sys
from promptcache.engine.heap import unmap_large_allocations

class MallInfo2(ctypes.Structure):
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(n, ctypes.c_size_t) for n in names.split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def mapped():
    return libc.mallinfo2().hblkhd

big = libc.malloc(16 << 20)
ctypes.memset(big, 1, 16 << 20)
libc.free(big)  # glibc's default: the mmap threshold rises to 16 MiB
fixed = unmap_large_allocations() if sys.argv[1] == "fixed" else None
before = mapped()
buf = libc.malloc(4 << 20)
ctypes.memset(buf, 1, 4 << 20)
alive = mapped()
libc.free(buf)
print(json.dumps({"set": fixed, "grew": alive - before, "after": mapped() - before}))
"""


def _child(mode: str) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    ).stdout
    result: dict[str, int] = json.loads(out)
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_freed_large_buffer_is_unmapped() -> None:
    default = _child("default")
    assert default["grew"] == 0  # from the heap: its pages stay after free
    fixed = _child("fixed")
    assert fixed["set"] is True
    assert fixed["grew"] >= 4 << 20  # a mapping of its own
    assert fixed["after"] == 0  # unmapped when freed
