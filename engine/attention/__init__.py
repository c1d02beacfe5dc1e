"""Attention backends behind a lazy registry: ``get_backend("torch" | "triton")``.

Each entry is a small factory that imports its module inside the function, so choosing the torch
backend never imports triton (and importing this package imports neither).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from promptcache.errors import ConfigError

if TYPE_CHECKING:
    from .base import AttentionBackend

__all__ = ["BACKENDS", "get_backend"]


def _torch() -> AttentionBackend:
    from .torch_ref import TorchAttentionBackend

    return TorchAttentionBackend()


def _triton() -> AttentionBackend:
    try:
        from .triton import TritonAttentionBackend  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise ConfigError(
            f"attention_backend='triton' is unavailable ({exc}); use attention_backend='torch'"
        ) from exc
    backend: AttentionBackend = TritonAttentionBackend()
    return backend


#: Backend name -> factory. The factory imports its module lazily.
BACKENDS: dict[str, Callable[[], AttentionBackend]] = {"torch": _torch, "triton": _triton}


def get_backend(name: str) -> AttentionBackend:
    """Instantiate the attention backend called ``name``.

    Raises:
        ConfigError: the name is unknown, or its module cannot be imported here.
    """
    factory = BACKENDS.get(name)
    if factory is None:
        raise ConfigError(
            f"attention_backend={name!r} is unknown; choose one of {', '.join(sorted(BACKENDS))}"
        )
    return factory()
