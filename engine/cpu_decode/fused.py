"""``FusedDecode``: a forward pass of an int4 Llama through ``decode_step.c``.

``FusedDecode.build`` checks the model and KV pool, repacks each decoder projection's int4
weight into the kernel's layout (panels of 16 rows, ``pack_panels``, by way of ``pack_int4``'s
rows) and fills one ``Layer``
struct per layer with pointers to them, the norms and the layer's KV pool; the engine then
calls it for every forward pass, prefill chunks and decode steps alike (``ModelRunner.execute``),
planning each pass's attention first (``plan.attention_plan``). The pointers stay valid because
the structs' tensors are kept here and the pool is allocated once.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from collections.abc import Callable, Sequence
from typing import cast

import torch

from ..attention.base import AttnMetadata, KVCacheLayer
from ..models.llama import DecoderLayer, LlamaForCausalLM
from ..models.quant_linear import INT4_GROUP_SIZE, Int4Linear, Int8Linear
from .library import CpuDecodeUnavailable, Dims, Layer, Q4Weight, load_library
from .plan import attention_plan

__all__ = [
    "KV_DTYPES",
    "MAX_PASS_ROWS",
    "SCRATCH_KEPT_ROWS",
    "FusedDecode",
    "drop_torch_copies",
    "int8_rows_ranker",
    "kernel_codes",
    "kernel_scales",
    "kernel_weights",
    "pack_int4",
    "pack_layer_weights",
    "pack_panels",
    "restore_dense_copies",
]


KV_DTYPES = (torch.float16, torch.float32)
"""KV pool element types the kernel reads and writes. An fp16 pool is converted by F16C on every
load and store (rounded to nearest even on the store, as torch's ``.half()``); the attention's
sums stay fp32. It holds a token in half an fp32 pool's bytes (SmolLM2: 23,040 bytes, as
llama.cpp's default f16 cache)."""

MAX_PASS_ROWS = 256
"""Most rows (new tokens) one call of the kernel runs. A longer pass (a 1,088-token prompt) is
run as consecutive calls of at most this many rows, each sequence's rows in order, so a later
call's tokens attend to the K/V an earlier one stored: the same outputs up to the attention's
summation order. The kernel's scratch grows with the rows of a call (for SmolLM2 about 12 KB a
row and 0.8 MB for the MLP's blocks of 64 rows, ``MLP_TILE_ROWS`` in decode_step.c: 14 MB at
1,088 rows); this bounds it at about 3.9 MB, at the cost of reading the weights once per
call."""

SCRATCH_KEPT_ROWS = 64
"""Calls of at most this many rows (decode steps, short prefill chunks, the new tail of a prompt
after a prefix hit) reuse a scratch kept between passes; a longer call's scratch is allocated
for its pass and freed when the pass ends (a mapping of its own: glibc's ``M_MMAP_THRESHOLD``,
``engine/heap.py``), so a long prefill's scratch (3.4-3.9 MB besides the attention's in calls
of 218-256 SmolLM2 rows) is not resident beside a full KV pool while decoding. That pass
pays the page faults of its scratch again (about 0.3 ms per MB: 2 ms against a 1,088-token
prefill's 1.25 s); passes of up to 64 rows pay none. While a long pass runs, the kept scratch
is freed too (about 2 MB of SmolLM2's after a 64-row call over 1,088 keys), and made again
when it ends with the part the short calls used written, so it is not resident beside the
pass's own and the next short call takes no page faults."""


def _dense_values(layer: Int4Linear) -> torch.Tensor:
    """The layer's dense copy as a plain fp32 ``[out, in]`` matrix.

    Raises:
        CpuDecodeUnavailable: the layer keeps no dense copy (``dense_min_rows=None``).
    """
    dense = layer.dense
    if dense is None:
        raise CpuDecodeUnavailable("an int4 layer keeps no dense copy to unpack its weight from")
    return (dense.to_dense() if dense.is_mkldnn else dense).float().contiguous()


def pack_int4(layer: Int4Linear, lib: ctypes.CDLL) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's int4 copy of an ``Int4Linear`` weight ``[out, in]``: the same values.

    The layer's grid is ``w = (q - 8) * scale + zero`` with bf16 ``scale`` / ``zero`` per group
    of ``INT4_GROUP_SIZE`` (32) inputs; ``q`` is read back from its dense copy (exact: a value is
    within a bf16 rounding of its grid point, far less than half a step) and stored with the
    bf16 ``scale`` and ``zero`` themselves (the kernel multiplies by ``w = d * q + m``,
    ``d = scale``, ``m = zero - 8 * scale`` in fp32, computed as it reads a group), by the
    library's ``pc_pack_q4`` in one pass (SmolLM2's whole ``build``: 0.9 s with the library's
    compile, against 2.4 s when this was torch ops, on a loaded 2-core machine).

    Args:
        layer: the int4 layer.
        lib: ``load_library()``.

    Returns:
        ``qs`` uint8 ``[out, in / 2]`` (byte ``16 g + j`` of a row: ``q`` of input ``32 g + j``
        in the low nibble, of ``32 g + 16 + j`` in the high one) and ``dm`` bf16
        ``[out, in / 32, 2]`` (``scale``, ``zero``: the layer's own values, bit for bit):
        ``0.625`` bytes per weight.

    Raises:
        CpuDecodeUnavailable: the layer keeps no dense copy (``dense_min_rows=None``) to read
            ``q`` from, or its group size is not 32.
    """
    if INT4_GROUP_SIZE != 32:
        raise CpuDecodeUnavailable(f"the kernel takes int4 groups of 32, not {INT4_GROUP_SIZE}")
    values = _dense_values(layer)
    out_f, in_f = values.shape
    sz = layer.packed_scales().float()  # [in / 32, out, 2]
    scale = sz[..., 0].t().contiguous()  # [out, in / 32]
    zero = sz[..., 1].t().contiguous()
    qs = torch.empty(out_f, in_f // 2, dtype=torch.uint8)
    dm = torch.empty(out_f, in_f // 32, 2, dtype=torch.bfloat16)
    lib.pc_pack_q4(
        values.data_ptr(),
        scale.data_ptr(),
        zero.data_ptr(),
        out_f,
        in_f,
        qs.data_ptr(),
        dm.data_ptr(),
        torch.get_num_threads(),
    )
    return qs, dm


def pack_panels(
    qs: torch.Tensor, dm: torch.Tensor, lib: ctypes.CDLL
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same int4 weight as ``pack_int4``'s ``(qs, dm)``, as panels of 16 output rows, the
    one layout the kernel keeps: products of many rows (prefill chunks) and of one (decode at
    batch 1) both read it (``pc_pack_q4_panels``).

    Returns:
        ``pq`` uint8 ``[out / 16, in / 2, 16]`` (byte ``b`` of step ``s`` of panel ``c``: ``q`` of
        row ``16 c + b // 2``, input ``2 s + b % 2``, in the low nibble, of row
        ``16 c + 8 + b // 2`` in the high one: each row's two inputs side by side, as the int16
        product sums them) and ``pdm`` bf16 ``[out / 16, in / 32, 2, 16]`` (each group's 16
        scales, then its 16 zeros): 0.625 bytes per weight, as ``pack_int4``'s. Scales and
        zeros in bf16 rather than the fp32 ``d`` and ``m`` the products use take SmolLM2's
        decoder 64 MiB instead of 76, and give the same ``d`` and ``m`` bit for bit.
    """
    out_f, half = qs.shape
    in_f = 2 * half
    pq = torch.empty(out_f // 16, in_f // 2, 16, dtype=torch.uint8)
    pdm = torch.empty(out_f // 16, in_f // 32, 2, 16, dtype=torch.bfloat16)
    lib.pc_pack_q4_panels(
        qs.data_ptr(),
        dm.data_ptr(),
        out_f,
        in_f,
        pq.data_ptr(),
        pdm.data_ptr(),
        torch.get_num_threads(),
    )
    return pq, pdm


def kernel_weights(layer: Int4Linear, lib: ctypes.CDLL) -> tuple[torch.Tensor, ...]:
    """``(pq, pdm)`` of ``pack_panels``, the kernel's one copy of the layer's weight (its
    products of one row and of many read the same panels; ``pack_int4``'s row layout is only
    the step between), packed once per layer and kept on it: the first ``FusedDecode.build``
    frees the layer's dense copy, which ``pack_int4`` reads, so later builds over the same model
    (another KV pool) reuse these."""
    cached: tuple[torch.Tensor, ...] | None = getattr(layer, "_cpu_decode_weights", None)
    if cached is None:
        cached = pack_panels(*pack_int4(layer, lib), lib)
        layer._cpu_decode_weights = cached  # type: ignore[assignment]
    return cached


def kernel_codes(pq: torch.Tensor) -> torch.Tensor:
    """The codes ``q`` (int32 ``[out, in]``, 0..15) of ``pack_panels``' ``pq``
    ``[out / 16, in / 2, 16]`` (byte ``b`` of step ``s`` of panel ``c``: row ``16 c + b // 2``,
    input ``2 s + b % 2`` in the low nibble, row ``16 c + 8 + b // 2`` in the high one)."""
    panels, steps, _ = pq.shape
    halves = [
        nibbles.view(panels, steps, 8, 2).permute(0, 2, 1, 3).reshape(panels, 8, 2 * steps)
        for nibbles in (pq & 15, pq >> 4)
    ]
    return torch.cat(halves, dim=1).reshape(16 * panels, 2 * steps).to(torch.int32)


def kernel_scales(pdm: torch.Tensor) -> torch.Tensor:
    """``Int4Linear.scales_and_zeros`` (bf16 ``[in / 32, out, 2]``: ``scale``, ``zero``) read
    back from ``pack_panels``' ``pdm`` bf16 ``[out / 16, in / 32, 2, 16]``, which holds the
    same values in panel order: bit for bit."""
    panels, groups = pdm.shape[:2]
    scale = pdm[:, :, 0, :].permute(1, 0, 2).reshape(groups, 16 * panels)
    zero = pdm[:, :, 1, :].permute(1, 0, 2).reshape(groups, 16 * panels)
    return torch.stack([scale, zero], dim=-1)


def drop_torch_copies(linear: Int4Linear, packed: tuple[torch.Tensor, ...]) -> None:
    """Free what torch's int4 kernel alone reads once the fused kernel holds ``packed``
    (``kernel_weights``): the dense copy, torch's packed weight (``Int4Linear.drop_packed``:
    repacked from the kernel's codes, bit for bit, if torch's kernel is ever called) and the
    bf16 scales (``Int4Linear.drop_scales``: ``kernel_scales`` reads the same values back from
    the panels; 13 MiB for SmolLM2's decoder)."""
    pq, pdm = packed[0], packed[1]
    linear.drop_dense()
    if linear.qweight is not None:
        linear.drop_packed(functools.partial(kernel_codes, pq))
    if linear.scales_and_zeros is not None:
        linear.drop_scales(functools.partial(kernel_scales, pdm))


def pack_layer_weights(module: torch.nn.Module, lib: ctypes.CDLL) -> int:
    """Pack every ``Int4Linear`` under ``module`` for the kernel (``kernel_weights``) and free
    what only torch's kernel reads at once (``drop_torch_copies``: the dense copy, torch's
    packed weight, the bf16 scales, which the panels hold too).

    The loader calls this on each decoder layer as soon as the layer is quantised
    (``load_model(..., pack_for_cpu_kernel=True)``), so one layer's dense copy exists at a time
    instead of the whole model's (SmolLM2's fp32 copies are 404 MiB, which would otherwise be
    resident together until ``FusedDecode.build`` frees them, and set the process's peak RSS).
    If the kernel then cannot run, ``restore_dense_copies`` gives the layers their dense copies
    back.

    Returns:
        The number of layers packed.
    """
    count = 0
    for linear in module.modules():
        if isinstance(linear, Int4Linear) and linear.dense is not None:
            drop_torch_copies(linear, kernel_weights(linear, lib))
            count += 1
    _release_freed_memory()
    return count


def restore_dense_copies(model: torch.nn.Module) -> int:
    """Give back the dense copy and torch's packed weight of each ``Int4Linear`` that
    ``pack_layer_weights`` packed, and drop its kernel copies: the model as ``quantize_linears``
    made it, for the torch path when the fused kernel cannot run.

    The values come from the kernel's codes ``q`` and the layer's own bf16 ``scales_and_zeros``
    by the operations ``quantize_int4_groups`` made them with, ``(q - 8) * scale + zero`` in
    fp32, so they are the same bits.

    Returns:
        The number of layers restored.
    """
    count = 0
    for linear in model.modules():
        cached = getattr(linear, "_cpu_decode_weights", None)
        if not isinstance(linear, Int4Linear) or cached is None or linear.dense is not None:
            continue
        out_f, in_f = linear.out_features, linear.in_features
        q = kernel_codes(cached[0]).view(out_f, in_f // 32, 32).float()
        sz = linear.packed_scales().float()  # [in / 32, out, 2]
        scale = sz[..., 0].t()[..., None]
        zero = sz[..., 1].t()[..., None]
        linear.restore_dense(((q - 8) * scale + zero).reshape(out_f, in_f))
        linear.packed_weight()  # torch's packed weight back, before its codes' holder goes
        del linear._cpu_decode_weights
        count += 1
    return count


def int8_rows_ranker(
    lib: ctypes.CDLL,
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """The LM head's ranking product through the library (``pc_int8_rows_product``,
    ``int8_rows.c``), as ``Int8Linear.ranker`` takes it: ``rank(rows, qweight, scale_bf16)``
    with fp32 ``rows [R, in]`` (contiguous), int8 ``qweight [out, in]`` (``in`` a multiple of
    16) and bf16 ``scale_bf16 [out]`` returns fp32 ``[R, out]``: each row rounded to int16 with
    one scale (2^-16 of its largest value), the products summed exactly, then scaled; a row's
    values do not depend on ``R``. It reads the head's own rows, so the head needs no second
    copy of the vocabulary matrix to rank with.

    Raises (from ``rank``):
        MemoryError: the kernel could not allocate its scratch (``R * in`` int16).
    """

    def rank(rows: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        out_f, in_f = qweight.shape
        out = torch.empty(rows.shape[0], out_f)
        status = lib.pc_int8_rows_product(
            rows.data_ptr(),
            rows.shape[0],
            qweight.data_ptr(),
            scale.data_ptr(),
            out_f,
            in_f,
            out.data_ptr(),
            torch.get_num_threads(),
        )
        if status != 0:
            raise MemoryError(f"the LM head's product could not allocate {rows.shape[0]} rows")
        return out

    return rank


def _release_freed_memory() -> None:
    """Hand freed heap pages back to the OS (glibc's ``malloc_trim``): malloc's heap keeps freed
    memory mapped. At load, the freed dense copies, allocated layer by layer from the heap
    (SmolLM2: 1,102 MiB after the build without this, 802 MiB after the trim, 2026-12-02); after
    each long pass (``FusedDecode.__call__``), the heap pages its temporaries under glibc's mmap
    threshold touched (a call's embeddings, RoPE rows, index lists), which would otherwise stay
    resident beside the KV pool (about 0.3 ms a trim). Nothing happens where libc has no
    ``malloc_trim``."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _projections(layer: DecoderLayer) -> list[tuple[str, torch.nn.Module]]:
    """A decoder layer's four projections, in ``Layer``'s field order."""
    attn, mlp = layer.self_attn, layer.mlp
    return [
        ("self_attn.qkv_proj", attn.qkv_proj),
        ("self_attn.o_proj", attn.o_proj),
        ("mlp.gate_up_proj", mlp.gate_up_proj),
        ("mlp.down_proj", mlp.down_proj),
    ]


class FusedDecode:
    """Run a batch of new tokens (decode rows, prefill chunks) through every layer in one C call.

    Args (``build``): the loaded model, the runner's KV pool, its dtype. Use ``build``; the
    constructor takes what it has checked.

    Calling it: ``(input_ids [rows] int64, positions [rows] int64, meta, output_rows=None)``
    (any batch whose slots are all valid) -> the final hidden states ``[rows, hidden]`` fp32
    (after the model's final norm; ``[len(output_rows), hidden]`` for those rows only), each
    token's K/V written to its slot: what ``LlamaForCausalLM.forward`` returns for that batch,
    with each row's activations rounded to int16 (per group of 32) into the int4 products, the
    same bits for a row whatever the pass's row count (the torch kernel rounds them to bf16).
    Speed on SmolLM2-135M (int4, 2 threads): a 1,088-token prefill in 1.30 s and 64 tokens
    after 1,024 cached in 0.099 s (medians, ``benchmarks/engine_vs_llamacpp.py`` on an AMD EPYC
    Zen 4 running this AVX2 code, docs/benchmarks.md#engine-vs-llamacpp); against the torch
    path on an AVX2-only Zen 3, ``benchmarks/engine_prefill_paths.py``
    (docs/benchmarks.md#engine-prefill-paths). Decode steps on that Zen 3, here / on the torch
    path (alternating by request in one process, 2026-12-02): 1 row 22-26 / 56-68 ms, 16 rows
    sharing a 1,024-token prompt 104-114 / 203-230 ms.
    """

    def __init__(
        self,
        model: LlamaForCausalLM,
        lib: ctypes.CDLL,
        layers: ctypes.Array[Layer],
        dims: Dims,
        keep: list[torch.Tensor],
    ) -> None:
        self.model = model
        self._lib = lib
        self._layers = layers
        self._dims = dims
        self._keep = keep  # the tensors the structs point into
        self._scratch = torch.empty(0)  # calls of up to SCRATCH_KEPT_ROWS rows
        self._scratch_used = 0  # the most floats of it a call has used
        self._scratch_lent = 0  # its size while a long pass has freed it (0: not freed)
        self._pass_scratch: torch.Tensor | None = None  # longer calls', for one pass
        #: Decode steps run through the kernel so far.
        self.steps = 0

    @staticmethod
    def check(model: torch.nn.Module, device: torch.device) -> ctypes.CDLL:
        """Check everything but the KV pool: whether the kernel can run this model on
        ``device`` (the runner asks before it allocates the pool, whose ``"auto"`` dtype is
        float16 where it can).

        Returns:
            The loaded library (``load_library()``).

        Raises:
            CpuDecodeUnavailable: the first reason it cannot (the message names the setting
                to change), including a failed build of the C library.
        """
        if device.type != "cpu":
            raise CpuDecodeUnavailable(f"the model is on {device}, not the CPU")
        if not isinstance(model, LlamaForCausalLM):
            raise CpuDecodeUnavailable(f"{type(model).__name__} is not the Llama decoder")
        cfg = model.config
        if model.norm.weight.dtype != torch.float32:
            raise CpuDecodeUnavailable(
                f"the model runs in {model.norm.weight.dtype}; the kernel needs dtype='float32'"
            )
        if cfg.head_dim % 16:
            raise CpuDecodeUnavailable(f"head_dim {cfg.head_dim} is not a multiple of 16")
        if any(w is not None for w in cfg.sliding_windows):
            raise CpuDecodeUnavailable("the model uses a sliding attention window")
        decoder = [cast(DecoderLayer, layer) for layer in model.layers]
        for i, layer in enumerate(decoder):
            for name, linear in _projections(layer):
                if not isinstance(linear, Int4Linear):
                    raise CpuDecodeUnavailable(
                        f"layers.{i}.{name} is {type(linear).__name__}; the kernel needs "
                        "weight_dtype='int4'"
                    )
                if linear.bias is not None:
                    raise CpuDecodeUnavailable(
                        f"layers.{i}.{name} has a bias, which the kernel does not add"
                    )
        return load_library()

    @classmethod
    def build(
        cls, model: torch.nn.Module, kv_caches: Sequence[KVCacheLayer], device: torch.device
    ) -> FusedDecode:
        """Check that the fused step can run this model here with this pool (``check``, and a
        pool of one of ``KV_DTYPES`` without scales), and prepare it.

        Raises:
            CpuDecodeUnavailable: the first reason it cannot (the message names the setting
                to change), including a failed build of the C library.
        """
        lib = cls.check(model, device)
        pool_dtype = kv_caches[0].k_cache.dtype
        if pool_dtype not in KV_DTYPES or any(
            {kv.k_cache.dtype, kv.v_cache.dtype} != {pool_dtype} or kv.k_scale is not None
            for kv in kv_caches
        ):
            name = str(pool_dtype).removeprefix("torch.")
            raise CpuDecodeUnavailable(
                f"the KV pool is {name}, the kernel reads float16 or float32: use "
                "kv_cache_dtype='auto', 'float16' or 'float32'"
            )
        assert isinstance(model, LlamaForCausalLM)  # checked
        cfg = model.config
        decoder = [cast(DecoderLayer, layer) for layer in model.layers]
        keep: list[torch.Tensor] = []

        def q4(linear: torch.nn.Module) -> Q4Weight:
            assert isinstance(linear, Int4Linear)  # checked above
            packed = kernel_weights(linear, lib)
            keep.extend(packed)
            # The kernel needs no dense copy (404 MiB in fp32 for SmolLM2's decoder), freed as
            # soon as its layer is packed (so the peak RSS does not hold both): the torch path,
            # which runs only where this one cannot (an invalid slot), then takes torch's int4
            # kernel (repacking its weight and scales from these). Nothing below can fail any
            # more (every check is done).
            drop_torch_copies(linear, packed)
            return Q4Weight(
                None,  # the row layout: not kept, q4_gemv reads the panels too
                None,
                *(t.data_ptr() for t in packed),
                linear.out_features,
                linear.in_features,
            )

        layers = (Layer * len(model.layers))()
        for i, (layer, kv) in enumerate(zip(decoder, kv_caches, strict=True)):
            norms = (layer.input_layernorm.weight, layer.post_attention_layernorm.weight)
            keep.extend(n.detach().contiguous() for n in norms)
            ln1, ln2 = keep[-2].data_ptr(), keep[-1].data_ptr()
            layers[i] = Layer(
                ln1,
                ln2,
                *(q4(linear) for _, linear in _projections(layer)),
                kv.k_cache.data_ptr(),
                kv.v_cache.data_ptr(),
            )
            keep.extend((kv.k_cache, kv.v_cache))
        head = model.lm_head
        if (
            isinstance(head, Int8Linear)
            and head.refine_top > 0
            and head.in_features % 16 == 0
            and head.qweight.is_contiguous()
        ):
            head.ranker = int8_rows_ranker(lib)  # ranks from its own rows: no second copy
        _release_freed_memory()
        dims = Dims(
            cfg.hidden_size,
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
            cfg.intermediate_size,
            kv_caches[0].k_cache.shape[1],
            cfg.rms_norm_eps,
            cfg.head_dim**-0.5,
            1,
            int(pool_dtype == torch.float16),
        )
        return cls(model, lib, layers, dims, keep)

    def __call__(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        meta: AttnMetadata,
        output_rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """See the class docstring. ``meta``: the batch (every slot valid); ``output_rows``:
        int64 ``[k]`` ascending rows whose hidden states are returned (None: all), as
        ``LlamaForCausalLM.forward``'s: the last layer's o projection and MLP run for them
        only, and its attention only for the tasks that hold one of them (the same bits for
        them). A pass of more than ``MAX_PASS_ROWS`` rows runs as several calls
        (``_call_rows``)."""
        model = self.model
        rows = input_ids.shape[0]
        tables = meta.block_tables.to(torch.int32).contiguous()  # [seqs, width], -1 padded
        slots = meta.slot_mapping.to(torch.int64).contiguous()
        self._dims.nthreads = torch.get_num_threads()
        ctx = meta.context_lens.tolist()
        starts = meta.cu_seqlens_q.tolist()  # sequence s owns rows starts[s] .. starts[s + 1]
        keep = None if output_rows is None else output_rows.to(torch.int64)
        table_list = tables.tolist()
        calls = -(-rows // MAX_PASS_ROWS)
        step = -(-rows // calls)  # even calls: none of 1 row (its products would be fp32)
        outputs = []
        try:
            for r0 in range(0, rows, step):
                r1 = min(r0 + step, rows)
                # each sequence's rows in [r0, r1), and its keys once they are stored
                new = [max(0, min(b, r1) - max(a, r0)) for a, b in itertools.pairwise(starts)]
                seen = [c - (b - min(b, r1)) for c, b in zip(ctx, starts[1:], strict=True)]
                mine = None if keep is None else keep[(keep >= r0) & (keep < r1)] - r0
                # the call's rows only: embedded and their RoPE rows taken per call, so a long
                # pass holds one call's hidden states ([r1 - r0, hidden] fp32), not all of them
                x, cos, signed_sin = self._inputs(input_ids[r0:r1], positions[r0:r1])
                kept = self._call_rows(
                    x,
                    cos,
                    signed_sin,
                    slots[r0:r1],
                    tables,
                    table_list,
                    [max(1, c) for c in seen],
                    new,
                    mine,
                )
                if calls == 1 or kept == r1 - r0:
                    outputs.append(x[:kept])
                elif kept:
                    outputs.append(x[:kept].clone())  # not a view: the call's x is freed
        finally:
            self._pass_scratch = None  # a long pass's scratch, freed (SCRATCH_KEPT_ROWS)
            if self._scratch_lent:
                self._restore_kept_scratch()
            if calls > 1 or rows > SCRATCH_KEPT_ROWS:
                _release_freed_memory()  # the heap pages the pass's temporaries touched
        self.steps += 1
        if len(outputs) == 1:
            last = outputs[0]
        elif outputs:
            last = torch.cat(outputs)
        else:
            last = torch.empty(0, model.config.hidden_size)
        hidden: torch.Tensor = model.norm(last)
        return hidden

    def _inputs(
        self, input_ids: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One call's inputs: the embeddings ``x [rows, hidden]`` and RoPE's ``cos`` /
        ``signed_sin [rows, head_dim]`` rows of ``positions``, fp32, contiguous (each row's
        values do not depend on the other rows)."""
        model = self.model
        rows = input_ids.shape[0]
        x = model.embed_tokens(input_ids).to(torch.float32).contiguous()
        cos, signed_sin = model.rotary(positions, torch.float32)  # [rows, 1, head_dim] each
        return x, cos.reshape(rows, -1).contiguous(), signed_sin.reshape(rows, -1).contiguous()

    def _restore_kept_scratch(self) -> None:
        """The kept scratch again, as large as before the long pass freed it, with the part the
        short calls have used written once: its pages are resident as they were, so the next
        short call (a decode step, a prompt's new tail after a prefix hit) takes no page faults
        (about 0.3 ms per MB), which the long pass's end takes instead."""
        self._scratch = torch.empty(self._scratch_lent)
        self._scratch[: min(self._scratch_used, self._scratch_lent)].zero_()
        self._scratch_lent = 0

    def _call_rows(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        signed_sin: torch.Tensor,
        slots: torch.Tensor,
        tables: torch.Tensor,
        table_list: list[list[int]],
        ctx: list[int],
        new: list[int],
        keep: torch.Tensor | None,
    ) -> int:
        """One call of ``pc_forward`` over the rows of ``x`` (a view, updated in place: the
        first rows end as the last layer's outputs of the kept rows). ``ctx`` / ``new``: each
        sequence's keys after this call and its rows in it (0: not in it); ``keep``: the rows
        (relative, ascending) whose outputs are wanted, None for all. Returns how many."""
        rows = x.shape[0]
        cfg = self.model.config
        plan = attention_plan(
            self._lib,
            self._dims,
            table_list,
            ctx,
            new,
            self._dims.block_size,
            self._dims.nthreads,
            cfg.num_attention_heads,
            cfg.head_dim,
        )
        base = self._lib.pc_scratch_floats(ctypes.byref(self._dims), rows)
        need = base + plan.scratch_floats
        if rows <= SCRATCH_KEPT_ROWS:
            if self._scratch.numel() < need:
                self._scratch = torch.empty(need + need // 2)
            self._scratch_used = max(self._scratch_used, need)
            scratch = self._scratch
        else:
            if self._scratch.numel():
                # the kept scratch is freed for the pass, so its pages are not resident beside
                # the pass's own (about 2 MB of SmolLM2's, written by a 64-row call)
                self._scratch_lent = self._scratch.numel()
                self._scratch = torch.empty(0)
            if self._pass_scratch is None or self._pass_scratch.numel() < need:
                self._pass_scratch = None  # freed before its successor is allocated
                self._pass_scratch = torch.empty(need + need // 2)
            scratch = self._pass_scratch
        keep = None if keep is None else keep.contiguous()
        kept = rows if keep is None else keep.numel()
        self._lib.pc_forward(
            self._layers,
            len(self._layers),
            ctypes.byref(self._dims),
            rows,
            x.data_ptr(),
            cos.data_ptr(),
            signed_sin.data_ptr(),
            slots.data_ptr(),
            tables.data_ptr(),
            tables.shape[1],
            ctypes.byref(plan.struct),
            None if keep is None else keep.data_ptr(),
            kept,
            scratch.data_ptr(),
        )
        return kept
