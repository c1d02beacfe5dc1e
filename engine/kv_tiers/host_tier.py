"""The host-RAM tier: a fixed number of KV block slots in host memory, least recently used out.

Each slot holds one block of every layer, K and V, in the pool's own dtype (int8 / fp8
included), so a block copied down and back is the pool's bytes exactly. The storage is one
``[num_layers, 2, num_slots, block_size, num_kv_heads, head_dim]`` tensor: for each layer, K
(and V) of every slot lie like the pool's own ``[num_blocks, block_size, heads, head_dim]``
tensor, so a batch of blocks moves between pool and tier in one indexed copy per layer, row by
contiguous row (about 10x faster than copying ``[layers, 2, ...]`` blocks as bytes); where the
pool's tensors lie in one mapping, ``storage[:, :, slot]`` and the pool's block have the same
strided layout, and each block moves in one copy (`KVTiers`). It is
zero-filled when the tier is built, so its memory is resident from the start, as vLLM
allocates its CPU KV cache up front: a first write into an untouched page costs a page fault,
and on a VM that made the first demotions about 3x slower (100 against 30 ms for 56 SmolLM2
blocks).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

__all__ = ["HostEntry", "HostTier"]


@dataclass(slots=True)
class HostEntry:
    """One block held in RAM: its slot and the data the prefix cache's collision guard needs."""

    slot: int
    parent_hash: int
    token_ids: tuple[int, ...]


class HostTier:
    """LRU block slots in host memory.

    Args:
        num_slots: blocks the tier holds (>= 1).
        block_shape: ``(num_layers, 2, block_size, num_kv_heads, head_dim)``.
        dtype: the KV pool's element type.

    Not thread-safe (the scheduler's thread only).
    """

    def __init__(self, num_slots: int, block_shape: tuple[int, ...], dtype: torch.dtype) -> None:
        if num_slots < 1:
            raise ValueError(f"num_slots must be >= 1, got {num_slots}")
        self.num_slots = num_slots
        layers, kv, *rest = block_shape
        self.storage = torch.zeros((layers, kv, num_slots, *rest), dtype=dtype)
        self.entries: OrderedDict[int, HostEntry] = OrderedDict()  # first = least recent
        self._free_slots = list(range(num_slots - 1, -1, -1))

    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def is_full(self) -> bool:
        """True when every slot holds a block."""
        return not self._free_slots

    def get(self, block_hash: int) -> HostEntry | None:
        """The entry for `block_hash`, or None. Changes nothing."""
        return self.entries.get(block_hash)

    def touch(self, block_hash: int) -> None:
        """Mark an entry most recently used."""
        self.entries.move_to_end(block_hash)

    def lru_order(self) -> list[int]:
        """Hashes, least recently used first."""
        return list(self.entries)

    def add(self, block_hash: int, parent_hash: int, token_ids: tuple[int, ...]) -> int:
        """Give `block_hash` a free slot (most recently used) and return the slot, for the
        caller to fill.

        Raises:
            RuntimeError: no free slot (remove an entry first).
        """
        if not self._free_slots:
            raise RuntimeError("the host tier is full; remove an entry before adding one")
        slot = self._free_slots.pop()
        self.entries[block_hash] = HostEntry(slot, parent_hash, tuple(token_ids))
        return slot

    def block(self, slot: int) -> torch.Tensor:
        """Slot `slot` as a ``[num_layers, 2, block_size, num_kv_heads, head_dim]`` view."""
        return self.storage[:, :, slot]

    def remove(self, block_hash: int) -> HostEntry:
        """Drop an entry and free its slot (its data stays until the slot is reused).

        Raises:
            KeyError: no such entry.
        """
        entry = self.entries.pop(block_hash)
        self._free_slots.append(entry.slot)
        return entry

    def clear(self) -> None:
        """Drop every entry."""
        self.entries.clear()
        self._free_slots = list(range(self.num_slots - 1, -1, -1))
