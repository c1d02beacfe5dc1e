"""What the load keeps in memory at once.

- int4 layers are packed for the fused CPU kernel while the model loads (``load_model(...,
  pack_for_cpu_kernel=True)``, ``cpu_decode.pack_layer_weights``): each layer's dense copy,
  torch's packed weight and its bf16 scales (which the panels hold too) are
  freed as soon as the layer is packed, the kernel reuses the packed weights, and where the
  kernel then cannot run the dense copies come back bit for bit (``restore_dense_copies``), so
  the torch path gives the same greedy output as a model that was never packed.
- The pages of a memory-mapped GGUF file leave the process's RSS once their tensor is copied
  out (``gguf_weights.release_file_pages``) and read the same afterwards.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from promptcache.engine import LLM, SamplingParams
from promptcache.engine.attention import get_backend
from promptcache.engine.cpu_decode import (
    CpuDecodeUnavailable,
    load_library,
    pack_layer_weights,
    restore_dense_copies,
)
from promptcache.engine.gguf_weights import release_file_pages
from promptcache.engine.loader import load_model
from promptcache.engine.models.quant_linear import Int4Linear


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    try:
        return load_library()
    except CpuDecodeUnavailable as exc:
        pytest.skip(f"the fused CPU kernel cannot be built here: {exc}")


def _int4_layers(model: torch.nn.Module) -> list[Int4Linear]:
    return [m for m in model.modules() if isinstance(m, Int4Linear)]


def _dense(layer: Int4Linear) -> torch.Tensor:
    dense = layer.dense
    assert dense is not None
    return dense.to_dense() if dense.is_mkldnn else dense


def _load(model_dir: Path, pack: bool) -> torch.nn.Module:
    model, _ = load_model(
        model_dir,
        get_backend("torch"),
        dtype="float32",
        max_positions=128,
        weight_dtype="int4",
        pack_for_cpu_kernel=pack,
    )
    return model


def test_layers_are_packed_while_loading_and_restored_bit_for_bit(
    lib: ctypes.CDLL, tinystories_dir: Path
) -> None:
    plain = _load(tinystories_dir, pack=False)
    packed = _load(tinystories_dir, pack=True)
    plain_layers, packed_layers = _int4_layers(plain), _int4_layers(packed)
    assert len(plain_layers) == len(packed_layers) == 8  # 2 layers x 4 projections
    for layer in plain_layers:
        assert layer.dense is not None and getattr(layer, "_cpu_decode_weights", None) is None
    for layer in packed_layers:
        assert layer.dense is None and layer.dense_min_rows is None
        assert layer.qweight is None  # torch's packed copy is freed too
        assert layer.scales_and_zeros is None  # and its scales: the panels give them back
        assert len(layer._cpu_decode_weights) == 2  # pq, pdm: one layout
    assert restore_dense_copies(packed) == 8
    assert restore_dense_copies(packed) == 0  # nothing left to restore
    for before, after in zip(plain_layers, packed_layers, strict=True):
        assert after.dense_min_rows == before.dense_min_rows
        assert torch.equal(_dense(after), _dense(before))
        assert torch.equal(after.qweight, before.qweight)
        assert _bits(after.scales_and_zeros) == _bits(before.scales_and_zeros)
        assert getattr(after, "_cpu_decode_weights", None) is None


def _bits(t: torch.Tensor | None) -> list[int]:
    assert t is not None and t.dtype == torch.bfloat16
    return t.view(torch.int16).flatten().tolist()


def test_scales_are_freed_and_rebuilt_bit_for_bit_from_the_panels(lib: ctypes.CDLL) -> None:
    """The panels keep each group's bf16 scale and zero themselves, so every layer's bf16 scales
    are freed and rebuilt bit for bit when torch's kernel needs them, even a zero far below
    ``8 * scale``'s fp32 step (1e-9 beside 8 x 0.125), which the kernel's fp32
    ``m = zero - 8 * scale`` does not resolve."""
    gen = torch.Generator().manual_seed(0)
    layers = []
    for _ in range(2):
        linear = torch.nn.Linear(64, 32, bias=False)
        linear.weight.data.copy_(torch.randn(32, 64, generator=gen))
        layers.append(Int4Linear(linear))
    tiny = layers[0].scales_and_zeros
    assert tiny is not None
    tiny[0, 0] = torch.tensor([0.125, 1e-9])
    scales = [layer.packed_scales().clone() for layer in layers]
    assert pack_layer_weights(torch.nn.ModuleList(layers), lib) == 2
    for layer, before in zip(layers, scales, strict=True):
        assert layer.scales_and_zeros is None
        assert _bits(layer.packed_scales()) == _bits(before)
        assert layer.scales_and_zeros is not None  # kept once rebuilt


def test_the_kernel_reuses_the_weights_packed_while_loading(
    lib: ctypes.CDLL, tinystories_dir: Path
) -> None:
    llm = LLM(tinystories_dir, weight_dtype="int4", num_blocks=16)
    runner = llm.engine.runner
    assert runner.fused_decode is not None
    kept = {t.data_ptr() for t in runner.fused_decode._keep}
    for layer in _int4_layers(runner.model):
        assert layer.dense is None
        assert all(t.data_ptr() in kept for t in layer._cpu_decode_weights)


def test_torch_int4_path_repacks_its_weight_from_the_kernel_codes_bit_for_bit(
    lib: ctypes.CDLL, tinystories_dir: Path
) -> None:
    """A kernel-built model called through torch (``runner.model``) gives the same logits as one
    never packed: torch's packed weight is rebuilt from the kernel's codes on first use."""
    llm = LLM(tinystories_dir, weight_dtype="int4", num_blocks=16)
    runner = llm.engine.runner
    assert runner.fused_decode is not None
    layers = _int4_layers(runner.model)
    assert all(layer.qweight is None for layer in layers)
    plain = _load(tinystories_dir, pack=False)
    for layer, before in zip(layers, _int4_layers(plain), strict=True):
        before.drop_dense()  # both through torch's int4 kernel
        x_in = torch.randn(
            3, layer.in_features, generator=torch.Generator().manual_seed(layer.in_features)
        )
        assert torch.equal(layer(x_in), before(x_in))
        assert layer.qweight is not None and torch.equal(layer.qweight, before.qweight)
        assert _bits(layer.scales_and_zeros) == _bits(before.scales_and_zeros)


def test_torch_path_gets_the_dense_copies_back_when_the_kernel_cannot_run(
    lib: ctypes.CDLL, tinystories_dir: Path
) -> None:
    """An int8 KV pool: the kernel refuses it after the layers were packed at load."""
    params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    prompts = ["Once upon a time", "The cat sat on the mat and " * 6]
    refused = LLM(tinystories_dir, weight_dtype="int4", kv_cache_dtype="int8", num_blocks=32)
    runner = refused.engine.runner
    assert runner.fused_decode is None
    assert "float32" in (runner.fused_decode_unavailable or "")
    layers = _int4_layers(runner.model)
    assert all(layer.dense is not None for layer in layers)
    never = LLM(
        tinystories_dir,
        weight_dtype="int4",
        kv_cache_dtype="int8",
        num_blocks=32,
        fused_cpu_decode=False,
    )
    for a, b in zip(layers, _int4_layers(never.engine.runner.model), strict=True):
        assert torch.equal(_dense(a), _dense(b))
    got = [o.output_token_ids for o in refused.generate(prompts, params)]
    assert got == [o.output_token_ids for o in never.generate(prompts, params)]


def _rss_file() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_file_pages_leave_the_rss_once_released(tmp_path: Path) -> None:
    data = np.random.default_rng(0).integers(0, 255, 64 * 2**20, dtype=np.uint8)
    path = tmp_path / "weights.bin"
    data.tofile(path)
    mapped = np.memmap(path, mode="r")
    view = np.asarray(mapped[4096 * 3 + 100 :]).view(np.ndarray)  # not page-aligned at its start
    before = _rss_file()
    total = int(view.sum(dtype=np.uint64))  # reads every page
    assert _rss_file() - before > 48 * 2**20
    release_file_pages(view)
    assert _rss_file() - before < 8 * 2**20
    assert int(view.sum(dtype=np.uint64)) == total  # read again from the page cache
    assert np.array_equal(view[:10], data[4096 * 3 + 100 : 4096 * 3 + 110])


_ONEDNN_RUN = """
import sys
from promptcache.engine import LLM, SamplingParams
llm = LLM(sys.argv[1], weight_dtype="int4", num_blocks=16)
assert llm.engine.runner.fused_decode is not None
params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
llm.generate(["Once upon a time", "The cat sat on the mat and " * 6], params)
print("served")
"""


@pytest.mark.skipif(
    not torch.backends.mkldnn.is_available(),  # type: ignore[no-untyped-call]
    reason="torch without oneDNN",
)
def test_serving_on_the_fused_kernel_runs_no_onednn_primitive(
    lib: ctypes.CDLL, tinystories_dir: Path
) -> None:
    """The fused kernel keeps no dense copy, so nothing in the process needs oneDNN: its kernels,
    about 8 MiB of RSS once loaded, stay out. ``ONEDNN_VERBOSE=1`` makes oneDNN print a line for
    every primitive it creates or runs (and its version banner on first use); a dense-path serve
    prints them (the second half of the test), so their absence is read, not assumed."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    run = subprocess.run(
        [sys.executable, "-c", _ONEDNN_RUN, str(tinystories_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert run.stdout.splitlines()[-1] == "served"
    assert [line for line in run.stdout.splitlines() if line.startswith("onednn_verbose")] == []
    dense = _ONEDNN_RUN.replace("num_blocks=16", "num_blocks=16, fused_cpu_decode=False")
    dense = dense.replace("is not None", "is None")
    run = subprocess.run(
        [sys.executable, "-c", dense, str(tinystories_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert any(line.startswith("onednn_verbose") for line in run.stdout.splitlines())
