"""``--weight-dtype`` of ``promptcache engine serve`` and ``promptcache demo``: which weights the
engine loads a checkpoint with, and why, in words for their banners.

``auto`` (the default of both) is the engine type nearest the checkpoint's own weights: a GGUF
file whose decoder projections are stored in 4 bits or fewer gets int4 layers, 5 to 8 bits
int8 layers (``gguf_file.native_weight_dtype``), float types and checkpoint directories float
weights. int4 and int8 layers run on the CPU only, so ``auto`` on a GPU is float weights.
``float`` asks for float weights whatever the file holds (the engine's ``weight_dtype="auto"``,
weights in ``--dtype``); ``int8`` / ``int4`` ask for those layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["WEIGHT_CHOICES", "WeightChoice", "choose_weight_dtype"]

#: The values ``--weight-dtype`` takes.
WEIGHT_CHOICES = ("auto", "float", "int8", "int4")


@dataclass(frozen=True)
class WeightChoice:
    """What the engine loads.

    Attributes:
        name: "float", "int8" or "int4": the ``--weight-dtype`` value that loads the same
            weights explicitly.
        reason: why, in words, e.g. "--weight-dtype auto: nearest the file's Q4_1 decoder
            weights".
    """

    name: str
    reason: str

    @property
    def engine_weight_dtype(self) -> str:
        """``EngineConfig.weight_dtype``: "auto" (weights in the model dtype), "int8" or
        "int4"."""
        return "auto" if self.name == "float" else self.name

    @property
    def described(self) -> str:
        """The weights in words: "int4 weight-only decoder layers and an int8 LM head"..."""
        if self.name == "float":
            return "float weights"
        if self.name == "int4":  # the LM head stays int8 (quant_linear.quantize_linears)
            return "int4 weight-only decoder layers and an int8 LM head"
        return "int8 weight-only linear layers"


def choose_weight_dtype(
    model: str | Path, requested: str = "auto", device: str = "cpu"
) -> WeightChoice:
    """The weights ``--weight-dtype requested`` loads ``model`` (a checkpoint directory or a
    GGUF file, already resolved to a local path) with on ``device`` (see the module docstring).

    Raises:
        ValueError: ``requested`` is not one of :data:`WEIGHT_CHOICES`.
        ModelLoadError: ``model`` is a GGUF file the reader cannot parse (``auto`` only).
    """
    from .gguf_file import decoder_weight_types, is_gguf, native_weight_dtype

    if requested not in WEIGHT_CHOICES:
        raise ValueError(
            f"weight dtype must be one of {', '.join(WEIGHT_CHOICES)}, not {requested!r}"
        )
    if requested != "auto":
        return WeightChoice(requested, f"--weight-dtype {requested}")
    path = Path(model)
    if not (path.is_file() and is_gguf(path)):
        return WeightChoice("float", "--weight-dtype auto: a checkpoint directory's float weights")
    types = ", ".join(sorted(decoder_weight_types(path))) or "none"
    native = native_weight_dtype(path)
    if native == "auto":
        return WeightChoice("float", f"--weight-dtype auto: the file's decoder weights are {types}")
    if not device.startswith("cpu"):
        return WeightChoice(
            "float",
            f"--weight-dtype auto: {native} layers, nearest the file's {types} decoder weights, "
            f"run on the CPU only, not {device}",
        )
    return WeightChoice(native, f"--weight-dtype auto: nearest the file's {types} decoder weights")
