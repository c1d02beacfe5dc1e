"""Dequantise a GGUF file's tensors into Hugging Face-named torch tensors for ``load_weights``.

Every tensor is dequantised with ``gguf.quants.dequantize`` (llama.cpp's own numpy reference of
each block format) to float32, then cast to the engine's dtype. Supported tensor types:
``SUPPORTED_TYPES`` (F32, F16, BF16, the legacy Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 and the K-quants
Q2_K..Q6_K); any other type is a ``ModelLoadError`` naming it and the tensor.

llama.cpp's ``convert_hf_to_gguf.py`` (``LlamaModel.permute``, checked 2026-12-01) reorders the
rows of ``attn_q`` / ``attn_k`` in Llama files so that each head's two rotary halves are
interleaved (GPT-J style RoPE, which ggml's Llama graph uses); ``unpermute_qk`` reverses it, so the
weights fit the ``rotate_half`` RoPE of ``models/llama.py`` and of transformers. Qwen2 files are
written unpermuted (llama.cpp runs them with NeoX RoPE).
"""

from __future__ import annotations

import ctypes
import mmap
import re
from collections.abc import Iterator, MutableMapping
from pathlib import Path

import numpy as np
import torch

from promptcache.errors import ModelLoadError

from .gguf_file import metadata, open_gguf
from .model_config import ModelConfig

__all__ = ["SUPPORTED_TYPES", "dequantize_tensor", "hf_name", "iter_gguf_tensors", "unpermute_qk"]

#: GGML tensor types the loader dequantises (names of ``gguf.GGMLQuantizationType``).
SUPPORTED_TYPES = (
    "F32",
    "F16",
    "BF16",
    "Q4_0",
    "Q4_1",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
)

#: Rows of a quantised tensor dequantised at once (a 49,152-row embedding: 48 chunks).
_DEQUANT_CHUNK_ROWS = 1024

_TOP_LEVEL = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_PER_LAYER = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_LAYER_TENSOR = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|bias)$")


def hf_name(gguf_name: str) -> str | None:
    """The Hugging Face name of a GGUF tensor (``blk.3.attn_q.weight`` ->
    ``model.layers.3.self_attn.q_proj.weight``), or None for a name the engine has no place for."""
    if gguf_name in _TOP_LEVEL:
        return _TOP_LEVEL[gguf_name]
    match = _LAYER_TENSOR.match(gguf_name)
    if match is None or match.group(2) not in _PER_LAYER:
        return None
    layer, part, kind = match.groups()
    return f"model.layers.{layer}.{_PER_LAYER[part]}.{kind}"


def unpermute_qk(rows: np.ndarray, num_heads: int) -> np.ndarray:
    """Undo ``convert_hf_to_gguf``'s row permutation of a q or k projection.

    Args:
        rows: ``[num_heads * head_dim, ...]`` rows as the GGUF stores them: the values of a
            weight ``[out, in]`` or a bias ``[out]``, or a quantised weight's block bytes
            ``uint8 [out, bytes_per_row]`` (each output row is quantised on its own, so rows can
            be reordered before dequantising, on 4-8x fewer bytes).
        num_heads: query heads for ``attn_q``, KV heads for ``attn_k``.

    Returns:
        A new array of the same shape with rows in Hugging Face order: within each head,
        llama.cpp's ``(head_dim / 2, 2)`` interleaving becomes ``(2, head_dim / 2)`` halves.
    """
    half = rows.shape[0] // num_heads // 2
    return rows.reshape(num_heads, half, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def dequantize_tensor(
    data: np.ndarray,
    type_name: str,
    name: str,
    dtype: torch.dtype,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """One GGUF tensor's values as a torch tensor of ``dtype``.

    Args:
        data: the reader's array (``ReaderTensor.data``): blocks as ``uint8 [rows, bytes]`` for
            quantised types, the values themselves for F32/F16 (BF16: ``uint8`` bytes).
        type_name: its ``gguf.GGMLQuantizationType`` name, e.g. "Q4_1".
        name: the tensor's name, for the error message.
        dtype: the engine's dtype.
        out: where to write the values (a ``dtype`` tensor of their shape, e.g. the model's
            parameter: no second copy of the matrix then exists); None = a new tensor.

    Returns:
        ``[rows, cols]`` (or ``[n]``) values (``out`` when given); F32/F16 tensors that already
        have ``dtype`` are copied, everything else is dequantised to float32 and cast.

    Raises:
        ModelLoadError: ``type_name`` is not in ``SUPPORTED_TYPES``.
    """
    if type_name not in SUPPORTED_TYPES:
        raise ModelLoadError(
            f"tensor {name!r} has GGML type {type_name}, which the engine cannot dequantise; "
            f"supported: {', '.join(SUPPORTED_TYPES)}"
        )
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    if type_name in ("F32", "F16") or data.ndim < 2 or data.shape[0] <= _DEQUANT_CHUNK_ROWS:
        values = (
            torch.from_numpy(np.array(data))  # a private, writable copy of the mapped values
            if type_name in ("F32", "F16")
            else torch.from_numpy(dequantize(data, GGMLQuantizationType[type_name]))
        )
        return values.to(dtype) if out is None else out.copy_(values)
    kind = GGMLQuantizationType[type_name]
    # Row by row chunks (each row is quantised on its own): numpy's dequantisation makes several
    # float temporaries of its input's size, a few MB per chunk instead of the whole matrix's.
    first = torch.from_numpy(dequantize(data[:_DEQUANT_CHUNK_ROWS], kind))
    if out is None:
        out = torch.empty((data.shape[0], *first.shape[1:]), dtype=dtype)
    out[:_DEQUANT_CHUNK_ROWS] = first
    del first
    for start in range(_DEQUANT_CHUNK_ROWS, data.shape[0], _DEQUANT_CHUNK_ROWS):
        part = data[start : start + _DEQUANT_CHUNK_ROWS]
        out[start : start + part.shape[0]] = torch.from_numpy(dequantize(part, kind))
    return out


def iter_gguf_tensors(
    path: str | Path,
    config: ModelConfig,
    dtype: torch.dtype,
    into: MutableMapping[str, torch.Tensor] | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(hf_name, tensor)`` for every tensor of a GGUF file, one at a time, in ``dtype``.

    Llama q/k rows are put back in Hugging Face order (``unpermute_qk``). A tensor whose
    Hugging Face name is a key of ``into`` is dequantised straight into that ``dtype`` tensor
    of its shape (the loader passes the model's vocabulary matrices: 113 MB each for SmolLM2
    in fp32, so the file's dequantised copy never exists beside the model's), which is what is
    yielded; a tensor of another shape there is dequantised apart as the others are. Its entry
    is taken out of ``into`` then, so the mapping keeps no matrix alive once the model has let
    go of it (the loader quantises the vocabulary during the load).

    Raises:
        ModelLoadError: a tensor type outside ``SUPPORTED_TYPES``, or a tensor name the engine
            has no place for (e.g. a MoE expert).
    """
    reader = open_gguf(path)
    permuted = metadata(reader, "general.architecture") == "llama"
    heads = {
        "q_proj": config.num_attention_heads,
        "k_proj": config.num_key_value_heads,
    }
    for tensor in reader.tensors:
        name = hf_name(tensor.name)
        if name is None:
            raise ModelLoadError(
                f"{path}: tensor {tensor.name!r} has no place in a "
                f"{config.architecture} model; this GGUF file is not a plain Llama/Qwen2 decoder"
            )
        data = tensor.data
        if permuted:
            for proj, num_heads in heads.items():
                if f".{proj}." in name:
                    data = unpermute_qk(data, num_heads)
        dest = into.pop(name, None) if into is not None else None
        shape = tuple(int(n) for n in reversed(tensor.shape))
        if dest is not None and (tuple(dest.shape) != shape or dest.dtype != dtype):
            dest = None  # dequantised apart; load_weights reports a shape mismatch
        values = dequantize_tensor(data, tensor.tensor_type.name, tensor.name, dtype, dest)
        del dest
        yield name, values
        del values
        release_file_pages(tensor.data)


_MADV_DONTNEED = 4  # <sys/mman.h> on Linux


def release_file_pages(array: np.ndarray) -> None:
    """Drop this process's mapping of the memory-mapped file pages wholly inside ``array``.

    A page of the GGUF file that has been read stays in the process's RSS (as ``RssFile``) while
    the file is mapped; the loader has copied each tensor out by the time it is released, so
    ``madvise(MADV_DONTNEED)`` unmaps its pages (they stay in the kernel's page cache; a later
    read maps them again from there) and SmolLM2's 94 MB file no longer adds to the peak RSS
    of the load. Pages shared with a neighbouring tensor or the metadata are left alone.
    Nothing happens where libc or ``madvise`` is missing (not Linux).
    """
    page = mmap.PAGESIZE
    start = array.ctypes.data
    first = -(-start // page) * page
    last = (start + array.nbytes) // page * page
    if last <= first:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), _MADV_DONTNEED)
    except (OSError, AttributeError):
        pass
