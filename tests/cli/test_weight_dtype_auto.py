"""``--weight-dtype auto`` of ``promptcache engine serve`` and ``promptcache demo``: the engine
type nearest the checkpoint's own weights, the same choice in both (``engine.weight_choice``),
on GGUF files written here with the ``gguf`` package's own writer and quantiser."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import cli
from promptcache.demo.model import resolve_model, serving_weight_dtype
from promptcache.engine.weight_choice import WEIGHT_CHOICES, choose_weight_dtype

MODEL = Path(__file__).resolve().parents[3] / "shared" / "models" / "tinystories-656k"


def gguf_file(folder: Path, weight_type: str) -> Path:
    """A GGUF file holding two decoder projections (all that the choice reads) of one type."""
    import gguf
    import numpy as np
    from gguf.quants import quantize

    path = folder / f"tiny-{weight_type}.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    kind = gguf.GGMLQuantizationType[weight_type]
    for name in ("blk.0.attn_q.weight", "blk.0.ffn_down.weight"):
        values = np.linspace(-1, 1, 32 * 64, dtype=np.float32).reshape(32, 64)
        if weight_type == "F16":
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, quantize(values, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(
    ("weight_type", "name"),
    [("Q4_0", "int4"), ("Q4_1", "int4"), ("Q5_1", "int8"), ("Q8_0", "int8"), ("F16", "float")],
)
def test_auto_is_the_engine_type_nearest_the_files_weights(
    tmp_path: Path, weight_type: str, name: str
) -> None:
    path = gguf_file(tmp_path, weight_type)
    choice = choose_weight_dtype(path)
    assert choice.name == name
    if name == "float":
        assert choice.reason == f"--weight-dtype auto: the file's decoder weights are {weight_type}"
        assert choice.engine_weight_dtype == "auto"  # EngineConfig: weights in --dtype
    else:
        assert choice.reason == (
            f"--weight-dtype auto: nearest the file's {weight_type} decoder weights"
        )
        assert choice.engine_weight_dtype == name
    # the demo's header says what the engine it starts will load, in the same words
    assert serving_weight_dtype(resolve_model(str(path), environ={}), None) == (
        choice.name,
        choice.reason,
    )


def test_auto_on_a_gpu_is_float_weights_and_says_why(tmp_path: Path) -> None:
    choice = choose_weight_dtype(gguf_file(tmp_path, "Q4_1"), "auto", "cuda:0")
    assert choice.name == "float"
    assert choice.reason == (
        "--weight-dtype auto: int4 layers, nearest the file's Q4_1 decoder weights, run on the "
        "CPU only, not cuda:0"
    )


def test_a_checkpoint_directory_and_explicit_choices(tmp_path: Path) -> None:
    choice = choose_weight_dtype(MODEL)
    assert (choice.name, choice.described) == ("float", "float weights")
    assert choice.reason == "--weight-dtype auto: a checkpoint directory's float weights"
    q4 = gguf_file(tmp_path, "Q4_1")
    for requested in ("float", "int8", "int4"):
        explicit = choose_weight_dtype(q4, requested)
        assert (explicit.name, explicit.reason) == (requested, f"--weight-dtype {requested}")
    assert choose_weight_dtype(q4, "float").engine_weight_dtype == "auto"
    assert choose_weight_dtype(q4).described == (
        "int4 weight-only decoder layers and an int8 LM head"
    )
    with pytest.raises(ValueError, match="one of auto, float, int8, int4"):
        choose_weight_dtype(q4, "fp8")


def test_both_commands_take_the_same_choices() -> None:
    for command in (["engine", "serve"], ["demo"]):
        result = CliRunner().invoke(cli, [*command, "--weight-dtype", "fp8"])
        assert result.exit_code == 2
        assert "'fp8' is not one of 'auto', 'float', 'int8', 'int4'" in result.output
    assert WEIGHT_CHOICES == ("auto", "float", "int8", "int4")
