"""The disk tier: a file per KV block under a directory named by the engine's `TierKey`.

Layout::

    DIR/<TierKey.digest()>/key.json           what the blocks depend on (model, KV dtype, ...)
    DIR/<TierKey.digest()>/<hash hex>.kvb      one block

A block file is a fixed header, the block's token ids, then the block's bytes::

    magic b"PCKV" | format u32 | block hash 16 B | parent hash 16 B | num_tokens u32 |
    payload bytes u64 | CRC-32 u32 | token ids (int64 x num_tokens) | payload

all little-endian. The CRC-32 (zlib) covers everything in the file but itself. The payload is
the block's ``[num_layers, 2, block_size, num_kv_heads, head_dim]`` tensor in the pool's dtype,
byte for byte. Files are written to a temporary name and renamed, so a reader never sees half
a file under a block's name; a file cut short or altered afterwards fails its size or CRC check
when read and is deleted. A read is one ``readv`` of the whole file into a caller's buffer,
one byte longer than the file (a file that grew fails), and one CRC pass over the bytes read;
the payload is returned in place, as a view of that buffer.

The index (hash -> parent, tokens, size) is the files' headers: it is read once when the tier
opens (headers only; the CRC is checked when a block is read), so the blocks survive a
restart. Least recently used files (by modification time, which a hit refreshes) are deleted
when the directory would exceed its byte budget.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import time
import zlib
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from promptcache.errors import ConfigError

from .tier_key import TierKey

__all__ = ["BLOCK_FILE_SUFFIX", "FORMAT_VERSION", "DiskEntry", "DiskTier"]

BLOCK_FILE_SUFFIX = ".kvb"
FORMAT_VERSION = 1
_MAGIC = b"PCKV"
_HEADER = struct.Struct("<4sI16s16sIQ")  # magic, format, hash, parent, num_tokens, payload
_CRC = struct.Struct("<I")
_PREFIX_BYTES = _HEADER.size + _CRC.size


@dataclass(slots=True)
class DiskEntry:
    """One block on disk: what the collision guard needs, and the file's size in bytes."""

    parent_hash: int
    token_ids: tuple[int, ...]
    file_bytes: int


class DiskTier:
    """Block files under ``root / key.digest()``, LRU within ``capacity_bytes``.

    Args:
        root: the ``--kv-disk`` directory (created if missing).
        key: what the blocks depend on; its digest names the subdirectory.
        capacity_bytes: most bytes of block files kept (>= one block file).
        block_shape: ``[num_layers, 2, block_size, num_kv_heads, head_dim]`` of a block.
        dtype: the pool's element type.

    Raises:
        ConfigError: the directory cannot be created or written, or the budget holds no block.
    """

    def __init__(
        self,
        root: str | Path,
        key: TierKey,
        capacity_bytes: int,
        block_shape: tuple[int, ...],
        dtype: torch.dtype,
    ) -> None:
        self.root = Path(root).expanduser()
        self.key = key
        self.block_shape = tuple(block_shape)
        self.dtype = dtype
        numel = 1
        for n in self.block_shape:
            numel *= n
        self.payload_bytes = numel * torch.empty(0, dtype=dtype).element_size()
        block_file = _PREFIX_BYTES + 8 * key.block_size + self.payload_bytes
        if capacity_bytes < block_file:
            raise ConfigError(
                f"kv_disk_bytes={capacity_bytes} holds no KV block file of {block_file} bytes; "
                "raise kv_disk_bytes (--kv-disk-bytes)"
            )
        self.capacity_bytes = capacity_bytes
        self.dir = self.root / key.digest()
        self._dir_str = str(self.dir)
        #: Bytes of every block file (header, token ids, payload).
        self.file_bytes = block_file
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            key_file = self.dir / "key.json"
            key_file.write_text(json.dumps(key.as_json(), indent=2) + "\n", encoding="utf-8")
        except FileExistsError:  # mkdir(exist_ok=True): DIR/<key> is there and no folder
            raise ConfigError(
                f"cannot use {self.root} as the KV disk tier: {self.dir} is not a directory; "
                "pass a writable directory to --kv-disk"
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"cannot use {self.root} as the KV disk tier ({exc.strerror or exc}); pass a "
                "writable directory to --kv-disk"
            ) from None
        self.entries: OrderedDict[int, DiskEntry] = OrderedDict()  # first = least recent
        self.num_bytes = 0
        #: Files dropped when the tier opened (unreadable header, wrong size) or when read
        #: (CRC mismatch, cut short): a count.
        self.num_dropped = 0
        #: Block files deleted when the tier opened: damaged ones (`num_dropped` then) and the
        #: least recently used ones over ``capacity_bytes`` (a smaller budget than they were
        #: written under). The serve banner reports both.
        self.num_dropped_at_open = 0
        self.num_trimmed_at_open = 0
        #: Block writes that failed (disk full, a file over the size limit, the directory gone)
        #: and the last one's reason (``strerror``), for the shutdown's report.
        self.num_write_failures = 0
        self.last_write_error: str | None = None
        #: Why the last `read` that returned None refused its file.
        self.last_read_error: str | None = None
        self._scan()

    # Queries ---------------------------------------------------------------------------------

    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, block_hash: int) -> DiskEntry | None:
        """The entry for `block_hash`, or None. Changes nothing."""
        return self.entries.get(block_hash)

    def path(self, block_hash: int) -> Path:
        """Where `block_hash`'s file lives."""
        return self.dir / f"{block_hash:032x}{BLOCK_FILE_SUFFIX}"

    def _path_str(self, block_hash: int) -> str:
        return f"{self._dir_str}{os.sep}{block_hash:032x}{BLOCK_FILE_SUFFIX}"

    # Mutations -------------------------------------------------------------------------------

    def write(
        self,
        block_hash: int,
        parent_hash: int,
        token_ids: tuple[int, ...],
        data: torch.Tensor,
        pinned: Collection[int] = (),
    ) -> list[int]:
        """Store one block (most recently used), deleting LRU files beyond the budget.

        Args:
            block_hash / parent_hash / token_ids: the block's identity.
            data: ``block_shape`` tensor of ``dtype`` (copied byte for byte).
            pinned: hashes that must not be deleted to make room.

        Returns:
            Hashes deleted to make room (the new block's is never among them). An OSError while
            writing (disk full) stores nothing and returns [].
        """
        if block_hash in self.entries:
            self.touch(block_hash)
            return []
        payload = data.contiguous().view(torch.uint8).numpy().tobytes()
        tokens = struct.pack(f"<{len(token_ids)}q", *token_ids)
        header = _HEADER.pack(
            _MAGIC,
            FORMAT_VERSION,
            block_hash.to_bytes(16, "little"),
            parent_hash.to_bytes(16, "little"),
            len(token_ids),
            len(payload),
        )
        crc = zlib.crc32(payload, zlib.crc32(tokens, zlib.crc32(header)))
        size = len(header) + _CRC.size + len(tokens) + len(payload)
        removed = self._make_room(size, pinned)
        path = self.path(block_hash)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # two engines on one directory
        try:
            with tmp.open("wb") as fh:
                fh.write(header)
                fh.write(_CRC.pack(crc))
                fh.write(tokens)
                fh.write(payload)
            os.replace(tmp, path)
        except OSError as exc:
            self.num_write_failures += 1
            self.last_write_error = exc.strerror or str(exc)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            return removed
        self.entries[block_hash] = DiskEntry(parent_hash, tuple(token_ids), size)
        self.num_bytes += size
        return removed

    def new_buffer(self) -> np.ndarray:
        """A buffer `read` can fill: ``file_bytes + 1`` uint8, every page written once (so
        resident: a read into it pays no page faults)."""
        buffer = np.empty(self.file_bytes + 1, dtype=np.uint8)
        buffer.fill(0)
        return buffer

    def read(self, block_hash: int, buffer: np.ndarray | None = None) -> torch.Tensor | None:
        """The block's tensor, or None when its file is missing, cut short, grown or fails its
        CRC (the file and entry are then deleted). A hit refreshes the file's LRU position.

        Args:
            block_hash: the block to read.
            buffer: where the file is read (`new_buffer`; a new one when None). The returned
                tensor is a view of it: the caller must not reuse the buffer while it needs
                the tensor.

        Returns:
            A ``block_shape`` tensor of ``dtype``, the file's payload in place (no copy).
        """
        entry = self.entries.get(block_hash)
        if entry is None:
            return None
        if buffer is None:
            buffer = self.new_buffer()
        # One spare byte past the file's size: a file that grew fills it and fails.
        view = buffer.data[: entry.file_bytes + 1]
        got = 0
        try:
            fd = os.open(self._path_str(block_hash), os.O_RDONLY)
            try:
                while got < len(view):
                    n = os.readv(fd, [view[got:]])
                    if n == 0:
                        break
                    got += n
            finally:
                os.close(fd)
        except OSError as exc:
            got = -1
            self.last_read_error = exc.strerror or str(exc)
        data = None
        if got == entry.file_bytes:
            data = self._decode(view[: entry.file_bytes], block_hash, entry)
            if data is None:
                self.last_read_error = "its header, token ids or CRC-32 do not match"
        elif got >= 0:
            size = "cut short" if got < entry.file_bytes else "grown"
            self.last_read_error = f"{size} since the tier indexed it"
        if data is None:
            self.num_dropped += 1
            self.remove(block_hash)
            return None
        self.touch(block_hash)
        return data

    def touch(self, block_hash: int) -> None:
        """Mark an entry most recently used (in memory and in the file's mtime)."""
        self.entries.move_to_end(block_hash)
        with contextlib.suppress(OSError):
            os.utime(self._path_str(block_hash))

    def mark_used_in_order(self, hashes: Sequence[int]) -> None:
        """Make the entries of `hashes` (those the tier holds) the most recently used, the last
        one most recent: in the index, and in file modification times that increase by 1 us
        each, so a tier opened on this directory reads the same order even where a burst of
        writes would stamp many files with the same time."""
        start = time.time_ns()
        for i, block_hash in enumerate(h for h in hashes if h in self.entries):
            self.entries.move_to_end(block_hash)
            stamp = start + i * 1000
            with contextlib.suppress(OSError):
                os.utime(self._path_str(block_hash), ns=(stamp, stamp))

    def remove(self, block_hash: int) -> None:
        """Delete one block's file and entry (no-op if absent)."""
        entry = self.entries.pop(block_hash, None)
        if entry is not None:
            self.num_bytes -= entry.file_bytes
        self.path(block_hash).unlink(missing_ok=True)

    def clear(self) -> list[int]:
        """Delete every block file; returns the hashes deleted."""
        hashes = list(self.entries)
        for block_hash in hashes:
            self.remove(block_hash)
        return hashes

    # Internals -------------------------------------------------------------------------------

    def _make_room(self, size: int, pinned: Collection[int]) -> list[int]:
        removed: list[int] = []
        for block_hash in list(self.entries):
            if self.num_bytes + size <= self.capacity_bytes:
                break
            if block_hash in pinned:
                continue
            self.remove(block_hash)
            removed.append(block_hash)
        return removed

    def _decode(self, raw: memoryview, block_hash: int, entry: DiskEntry) -> torch.Tensor | None:
        if len(raw) != entry.file_bytes or len(raw) < _PREFIX_BYTES:
            return None
        head = raw[: _HEADER.size]
        magic, version, h, parent, num_tokens, num_payload = _HEADER.unpack(head)
        if (
            magic != _MAGIC
            or version != FORMAT_VERSION
            or int.from_bytes(h, "little") != block_hash
            or num_payload != self.payload_bytes
        ):
            return None
        (crc,) = _CRC.unpack_from(raw, _HEADER.size)
        body = raw[_PREFIX_BYTES:]
        if zlib.crc32(body, zlib.crc32(head)) != crc:
            return None
        tokens = struct.unpack_from(f"<{num_tokens}q", body)
        if tokens != entry.token_ids or int.from_bytes(parent, "little") != entry.parent_hash:
            return None
        offset = _PREFIX_BYTES + 8 * num_tokens  # the payload, used in place (no copy)
        data = torch.frombuffer(raw, dtype=torch.uint8, offset=offset, count=num_payload)
        return data.view(self.dtype).reshape(self.block_shape)

    def _scan(self) -> None:
        """Read every block file's header (oldest modification first) into the index. Only
        regular files are read or deleted: anything else in the directory is left as it is."""
        found: list[tuple[int, int, DiskEntry]] = []
        for path in self.dir.iterdir():
            if not path.is_file():
                continue  # a folder, a FIFO, a dangling link: not a block file, left alone
            if path.suffix == ".tmp":
                if not _writer_alive(path):
                    path.unlink(missing_ok=True)  # a write cut short by a crash
                continue
            if path.suffix != BLOCK_FILE_SUFFIX:
                continue
            parsed = self._read_header(path)
            if parsed is None:
                self.num_dropped += 1
                path.unlink(missing_ok=True)
                continue
            block_hash, entry, mtime = parsed
            found.append((mtime, block_hash, entry))
        found.sort(key=lambda item: item[0])
        for _, block_hash, entry in found:
            self.entries[block_hash] = entry
            self.num_bytes += entry.file_bytes
        self.num_dropped_at_open = self.num_dropped
        self.num_trimmed_at_open = len(self._make_room(0, ()))

    def _read_header(self, path: Path) -> tuple[int, DiskEntry, int] | None:
        try:
            stat = path.stat()
            with path.open("rb") as fh:
                head = fh.read(_PREFIX_BYTES)
                if len(head) != _PREFIX_BYTES:
                    return None
                magic, version, h, parent, num_tokens, num_payload = _HEADER.unpack_from(head)
                if (
                    magic != _MAGIC
                    or version != FORMAT_VERSION
                    or num_payload != self.payload_bytes
                    or num_tokens != self.key.block_size
                ):
                    return None
                raw_tokens = fh.read(8 * num_tokens)
        except OSError:
            return None
        if len(raw_tokens) != 8 * num_tokens:
            return None
        block_hash = int.from_bytes(h, "little")
        size = _PREFIX_BYTES + 8 * num_tokens + num_payload
        if stat.st_size != size or path.name != f"{block_hash:032x}{BLOCK_FILE_SUFFIX}":
            return None
        tokens = struct.unpack(f"<{num_tokens}q", raw_tokens)
        entry = DiskEntry(int.from_bytes(parent, "little"), tokens, size)
        return block_hash, entry, stat.st_mtime_ns


def _writer_alive(tmp: Path) -> bool:
    """Whether another live process may still be writing ``tmp`` (``<hash>.<pid>.tmp``, written
    by `DiskTier.put` of the engine with that pid): such a file is left for its writer to
    rename; one of this process, of a process that is gone, or of a name without a pid is not."""
    _, dot, pid_text = tmp.stem.rpartition(".")
    if not dot or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # PermissionError: alive, another user's; OverflowError: not a pid
    return True
