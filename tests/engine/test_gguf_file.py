"""``gguf_file.open_gguf``'s reader parses the same fields as the stock ``gguf.GGUFReader``.

Its array fields slice their elements from the file when asked for (``_ArrayParts``) instead of
holding one numpy view per element; every part, index and value must be the stock reader's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from gguf_convert import write

from promptcache.engine.gguf_file import metadata, open_gguf, release
from promptcache.errors import ModelLoadError

VALUES: dict[str, Any] = {
    "general.architecture": "llama",
    "tokenizer.ggml.tokens": ["<s>", "a", "bé", "", "ünïcödé ✓", "x" * 300],
    "tokenizer.ggml.merges": ["a b", "ab c"],
    "tokenizer.ggml.token_type": [1, 2, 3, 1, 1, 6],
    "tokenizer.ggml.scores": [0.5, -1.25, 3.0],
    "some.bools": [True, False, True],
    "some.nested": [[1, 2], [3]],
    "llama.block_count": 2,
    "llama.rope.freq_base": 10000.0,
}


def _write(path: Path, endianess: gguf.GGUFEndian) -> Path:
    writer = gguf.GGUFWriter(path, "llama", endianess=endianess)
    for key, value in VALUES.items():
        if key != "general.architecture":
            writer.add_key_value(key, value, _type(value))
    writer.add_tensor("token_embd.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    write(writer)
    return path


def _type(value: Any) -> gguf.GGUFValueType:
    if isinstance(value, list):
        return gguf.GGUFValueType.ARRAY
    return gguf.GGUFValueType.get_type(value)


def _assert_same_fields(ours: Any, stock: Any) -> None:
    assert list(ours.fields) == list(stock.fields)
    for key, want in stock.fields.items():
        got = ours.fields[key]
        assert (got.offset, got.name, got.types) == (want.offset, want.name, want.types), key
        assert list(got.data) == list(want.data), key
        assert len(got.parts) == len(want.parts), key
        for i, part in enumerate(want.parts):
            assert got.parts[i].dtype == part.dtype and np.array_equal(got.parts[i], part), (key, i)
        assert got.parts[-1].dtype == want.parts[-1].dtype, key
        assert got.contents() == want.contents(), key
        if want.types[-1] == gguf.GGUFValueType.STRING and len(want.data) > 1:
            for i in range(len(want.data)):
                assert got.contents(i) == want.contents(i), (key, i)
    assert [(t.name, t.tensor_type, t.data_offset) for t in ours.tensors] == [
        (t.name, t.tensor_type, t.data_offset) for t in stock.tensors
    ]


@pytest.mark.parametrize("endianess", [gguf.GGUFEndian.LITTLE, gguf.GGUFEndian.BIG])
def test_fields_are_the_stock_readers(tmp_path: Path, endianess: gguf.GGUFEndian) -> None:
    path = _write(tmp_path / f"{endianess.name}.gguf", endianess)
    try:
        reader = open_gguf(path)
        _assert_same_fields(reader, gguf.GGUFReader(path))
        for key, value in VALUES.items():
            if key == "some.nested":  # the stock reader flattens arrays of arrays
                value = [1, 2, 3]
            assert metadata(reader, key) == value, key
    finally:
        release(path)


def test_smollm2_fields_are_the_stock_readers(smollm2_gguf: Path) -> None:
    try:
        _assert_same_fields(open_gguf(smollm2_gguf), gguf.GGUFReader(smollm2_gguf))
    finally:
        release(smollm2_gguf)


def test_a_string_array_cut_off_is_a_load_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "whole.gguf", gguf.GGUFEndian.LITTLE)
    data = path.read_bytes()
    last = data.index(("x" * 300).encode())  # inside the last token's bytes
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: last + 10])
    with pytest.raises(ModelLoadError, match=r"cannot read .* as a GGUF file"):
        open_gguf(cut)
