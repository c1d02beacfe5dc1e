"""Build and load ``decode_step.c`` (the forward pass) and ``int8_rows.c`` (the LM head's ranking
product) as one library: the system C compiler, a per-user cache, ctypes.

The sources are compiled once per (sources, compiler, flags) into
``$PROMPTCACHE_CPU_DECODE_DIR`` (default ``$XDG_CACHE_HOME/promptcache/cpu_decode``, i.e.
``~/.cache/promptcache/cpu_decode``) as ``decode_step-<hash>.so``; the name's hash covers the
sources' text, the compiler command, its ``--version`` line and the flags, so an edit or another
compiler builds afresh and a stale library is never loaded; a cached file that is not a complete ELF
library (truncated, emptied) is built again. Compiling takes about a second. The compiler is
``$CC`` (split like a shell would: ``ccache gcc`` works) or the first of ``cc``, ``gcc``,
``clang`` on ``PATH``.

OpenMP: the library is linked with ``-fopenmp`` (``libgomp.so.1``) and loaded after torch, whose
Linux wheels ship their own ``libgomp.so.1``; the dynamic loader then binds both to the one
already loaded, so torch's ops and these kernels share one thread pool (checked in
tests/engine/test_cpu_decode.py through ``/proc/self/maps``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

__all__ = [
    "CFLAGS",
    "AttnPlan",
    "CpuDecodeUnavailable",
    "Dims",
    "Layer",
    "Q4Weight",
    "build_dir",
    "load_library",
]

SOURCES = tuple(Path(__file__).with_name(name) for name in ("decode_step.c", "int8_rows.c"))
#: Compile flags. -ffast-math lets the compiler reorder fp32 sums (reductions) and call glibc's
#: vectorised expf (libmvec); the kernels' results differ from torch's by summation order only
#: (tests bound it). It is a compile flag only: gcc links a library built with it at link time
#: against crtfastmath.o, whose constructor sets flush-to-zero / denormals-are-zero for the
#: whole process on load (Python's and torch's floats lose their subnormals; hypothesis refuses
#: to run), so the object is linked by a second command without it (test_cpu_decode.py checks).
#: -mf16c: the conversions of an fp16 KV pool (``vcvtph2ps`` / ``vcvtps2ph``), which every x86-64
#: CPU with AVX2 has.
CFLAGS = ["-O3", "-mavx2", "-mfma", "-mf16c", "-ffast-math", "-fopenmp", "-fPIC"]
LDFLAGS = ["-shared", "-fopenmp"]


class CpuDecodeUnavailable(RuntimeError):
    """The fused CPU decode cannot run here; the message says why and what would change it."""


class Q4Weight(ctypes.Structure):
    """``pc_q4``: an int4 weight ``[n, k]`` (pointers to its panels ``pq``, ``pdm``; ``qs`` and
    ``dm`` may be NULL: the kernel reads only the panels)."""

    _fields_ = [
        ("qs", ctypes.c_void_p),
        ("dm", ctypes.c_void_p),
        ("pq", ctypes.c_void_p),
        ("pdm", ctypes.c_void_p),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
    ]


class Layer(ctypes.Structure):
    """``pc_layer``: one decoder layer's norms, four int4 weights and KV pool pointers (fp32 or
    fp16 as ``Dims.kv_f16`` says)."""

    _fields_ = [
        ("ln1", ctypes.c_void_p),
        ("ln2", ctypes.c_void_p),
        ("qkv", Q4Weight),
        ("o", Q4Weight),
        ("gate_up", Q4Weight),
        ("down", Q4Weight),
        ("k_cache", ctypes.c_void_p),
        ("v_cache", ctypes.c_void_p),
    ]


class Dims(ctypes.Structure):
    """``pc_dims``: model sizes (tokens, heads, elements), RMSNorm eps, softmax scale, threads,
    and ``kv_f16``: 1 if the KV pool holds fp16, 0 (the default) for fp32."""

    _fields_ = [
        *[
            (name, ctypes.c_int64)
            for name in (
                "hidden",
                "heads",
                "kv_heads",
                "head_dim",
                "inter",
                "block_size",
            )
        ],
        ("eps", ctypes.c_float),
        ("scale", ctypes.c_float),
        ("nthreads", ctypes.c_int32),
        ("kv_f16", ctypes.c_int32),
    ]


class AttnPlan(ctypes.Structure):
    """``pc_attn_plan``: the attention tasks of one step (built by ``fused.attention_plan``)."""

    _fields_ = [
        ("num_tasks", ctypes.c_int64),
        *[
            (name, ctypes.c_void_p)
            for name in (
                "rows_start",
                "task_rows",
                "row_hi",
                "part_of",
                "table_row",
                "b0",
                "b1",
                "hi",
                "parts_start",
                "row_parts",
            )
        ],
        ("task_floats", ctypes.c_int64),
    ]


def build_dir() -> Path:
    """Where compiled libraries are cached (see the module docstring)."""
    explicit = os.environ.get("PROMPTCACHE_CPU_DECODE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "promptcache" / "cpu_decode"


def _compiler() -> tuple[str, ...]:
    """The compiler command: ``$CC`` split like a shell would (``ccache gcc`` works), else the
    first of cc / gcc / clang on ``PATH``."""
    cc = shlex.split(os.environ.get("CC", ""))
    if cc:
        return tuple(cc)
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return (name,)
    raise CpuDecodeUnavailable(
        "no C compiler found (set $CC, or install gcc or clang) to build the fused CPU decode"
    )


def _complete_elf(path: Path | str) -> bool:
    """Whether ``path`` is a 64-bit little-endian ELF file holding all of its section headers.

    ``dlopen`` of a truncated library can die of SIGBUS instead of failing, so a cached file is
    checked before it is loaded: its header's section table must end inside the file.
    """
    with open(path, "rb") as f:
        head = f.read(64)
        size = os.fstat(f.fileno()).st_size
    if len(head) < 64 or head[:6] != b"\x7fELF\x02\x01":
        return False
    shoff = int.from_bytes(head[0x28:0x30], "little")
    entsize, count = (int.from_bytes(head[i : i + 2], "little") for i in (0x3A, 0x3C))
    return 0 < shoff + entsize * count <= size


def _build(cc: tuple[str, ...], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    objs = [f"{tmp}.{i}.o" for i in range(len(SOURCES))]
    try:
        steps = [
            (f"compiling {source.name}", [*cc, *CFLAGS, "-c", str(source), "-o", obj])
            for source, obj in zip(SOURCES, objs, strict=True)
        ]
        steps.append((f"linking {target.name}", [*cc, *LDFLAGS, *objs, "-o", tmp, "-lm"]))
        for step, command in steps:
            proc = subprocess.run(command, capture_output=True, text=True)
            if proc.returncode != 0:
                first = (proc.stderr.strip().splitlines() or ["(no output)"])[0]
                raise CpuDecodeUnavailable(
                    f"{step} with {shlex.join(cc)} failed: {first} (set $CC to another compiler)"
                )
        if not _complete_elf(tmp):
            raise CpuDecodeUnavailable(
                f"{shlex.join(cc)} reported success but wrote no shared library (set $CC to "
                "another compiler)"
            )
        os.chmod(tmp, 0o755)  # mkstemp made it 0600: others sharing the directory may load it
        os.replace(tmp, target)  # atomic: a concurrent build never loads half a file
    finally:
        for path in (tmp, *objs):
            if os.path.exists(path):
                os.unlink(path)


def load_library() -> ctypes.CDLL:
    """The compiled library (building it on first use), with its functions' ctypes signatures.

    The compiler and the cache directory are read from the environment on every call (see the
    module docstring); a library once loaded for a pair of them is reused.

    Raises:
        CpuDecodeUnavailable: no compiler, the build failed, the cache directory is not
            writable, or this CPU lacks AVX2 / FMA / F16C.
    """
    return _load(_compiler(), build_dir())


@lru_cache(maxsize=8)
def _load(cc: tuple[str, ...], directory: Path) -> ctypes.CDLL:
    import torch  # noqa: F401  (torch's libgomp.so.1 must be the one loaded first)

    name = shlex.join(cc)
    try:
        out = subprocess.run([*cc, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise CpuDecodeUnavailable(f"the C compiler {name!r} does not run: {exc}") from None
    version = (out.stdout.strip().splitlines() or [""])[0]
    if not version:
        raise CpuDecodeUnavailable(
            f"the C compiler {name!r} printed no version for --version (set $CC to gcc or clang)"
        )
    key = hashlib.sha256(
        "\0".join(
            [*(s.read_text(encoding="utf-8") for s in SOURCES), name, version, *CFLAGS, *LDFLAGS]
        ).encode()
    ).hexdigest()[:16]
    target = directory / f"decode_step-{key}.so"
    try:
        if target.is_file() and not _complete_elf(target):
            target.unlink()  # a damaged copy (truncated, emptied): build it again
        if not target.is_file():
            _build(cc, target)
    except OSError as exc:
        raise CpuDecodeUnavailable(
            f"cannot write the compiled kernel to {target.parent}: {exc.strerror}; set "
            "PROMPTCACHE_CPU_DECODE_DIR to a writable directory"
        ) from None
    try:
        lib = ctypes.CDLL(str(target))
    except OSError as exc:
        raise CpuDecodeUnavailable(
            f"cannot load the compiled kernel {target}: {exc}; delete it to build it again"
        ) from None
    if not lib.pc_cpu_supported():
        raise CpuDecodeUnavailable(
            "this CPU lacks AVX2, FMA or F16C, which the fused CPU decode needs"
        )
    ptr, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    lib.pc_scratch_floats.restype = i64
    lib.pc_scratch_floats.argtypes = [ptr, i64]
    lib.pc_task_scratch_floats.restype = i64
    lib.pc_task_scratch_floats.argtypes = [ptr, i64, i64]
    lib.pc_forward.restype = None
    lib.pc_forward.argtypes = [ptr, i64, ptr, i64, ptr, ptr, ptr, ptr, ptr, i64, ptr, ptr, i64, ptr]
    lib.pc_pack_q4_panels.restype = None
    lib.pc_pack_q4_panels.argtypes = [ptr, ptr, i64, i64, ptr, ptr, i32]
    lib.pc_pack_q4.restype = None
    lib.pc_pack_q4.argtypes = [ptr, ptr, ptr, i64, i64, ptr, ptr, i32]
    lib.pc_matmul.restype = None
    lib.pc_matmul.argtypes = [ptr, ptr, ptr, ptr, i64, ptr]
    lib.pc_matmul_scratch_floats.restype = i64
    lib.pc_matmul_scratch_floats.argtypes = [i64, i64]
    lib.pc_paged_attention.restype = None
    lib.pc_paged_attention.argtypes = [ptr, i64, ptr, ptr, ptr, ptr, i64, ptr, ptr, ptr]
    lib.pc_int8_rows_product.restype = ctypes.c_int
    lib.pc_int8_rows_product.argtypes = [ptr, i64, ptr, ptr, i64, i64, ptr, i32]
    return lib
