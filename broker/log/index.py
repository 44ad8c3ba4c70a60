"""Sparse segment indexes in Kafka's on-disk formats, held in memory as `array`s.

`OffsetIndex` (`.index`): 8-byte entries `relative_offset int32, position int32`, big-endian; an
entry maps the last offset of a batch to the file position where that batch starts. Entries are
added every index.interval.bytes of appended data, so a lookup lands at most that many bytes
before the batch sought, and the reader scans headers forward from there.

`TimeIndex` (`.timeindex`): 12-byte entries `timestamp int64, relative_offset int32`; an entry says
"the largest timestamp seen so far in this segment is `timestamp`, first reached in the batch ending
at `offset`". Timestamps strictly increase between entries.

Both are appended to their file as entries are made (unbuffered writes, so a kill -9 loses
nothing the kernel has; fsync happens on `flush`). A file that fails its sanity check on load
raises `IndexCorruptError` and the segment rebuilds it by scanning its log.
"""

from __future__ import annotations

import bisect
import os
import struct
import sys
from array import array
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorruptError(Exception):
    """An index file is malformed or inconsistent with its segment."""


class _IndexFile:
    """The file side of an index: an append-only file descriptor plus rename/delete/truncate."""

    entry_size = 0

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def _read_file(self) -> bytes:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise IndexCorruptError(f"{self.path} missing") from None
        if len(data) % self.entry_size:
            raise IndexCorruptError(
                f"{self.path} size {len(data)} is not a multiple of {self.entry_size}"
            )
        return data

    def _write_entry(self, data: bytes) -> None:
        os.write(self._open(), data)

    def _truncate_file(self, entries: int) -> None:
        os.ftruncate(self._open(), entries * self.entry_size)

    def flush(self) -> None:
        """fsync the index file."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Close the file descriptor (the in-memory entries stay usable)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename_to(self, path: Path) -> None:
        """Rename the index file (e.g. to `.deleted`); the open descriptor follows it."""
        try:
            os.replace(self.path, path)
        except FileNotFoundError:
            pass
        self.path = path

    def delete(self) -> None:
        """Close and unlink the file."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _big_endian(arr: array) -> array:  # type: ignore[type-arg]
    if sys.byteorder == "little":
        arr.byteswap()
    return arr


class OffsetIndex(_IndexFile):
    """Maps offsets to file positions: (relative offset, position) pairs in increasing order."""

    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(path, base_offset, max_entries)
        self._offsets: array[int] = array("i")
        self._positions: array[int] = array("i")

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_offset(self) -> int:
        """The last indexed offset, or the base offset when empty (Kafka's `lastOffset`)."""
        return self.base_offset + self._offsets[-1] if self._offsets else self.base_offset

    def entries(self) -> list[tuple[int, int]]:
        """All entries as (absolute offset, position)."""
        return [(self.base_offset + o, p) for o, p in zip(self._offsets, self._positions)]

    def load(self, log_size: int) -> None:
        """Read the file and sanity-check it against the segment's log size."""
        data = self._read_file()
        raw = _big_endian(array("i", data))
        offsets, positions = raw[0::2], raw[1::2]
        if offsets:
            if offsets[0] < 0 or offsets[-1] < offsets[0] or positions[-1] < positions[0]:
                raise IndexCorruptError(f"{self.path} entries are not increasing")
            if positions[-1] >= log_size or positions[0] < 0:
                raise IndexCorruptError(f"{self.path} points past the end of its log ({log_size})")
            if len(offsets) > 1 and (offsets[-2] >= offsets[-1] or positions[-2] >= positions[-1]):
                raise IndexCorruptError(f"{self.path} last entries are not increasing")
        self._offsets, self._positions = offsets, positions

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ignored unless `offset` is past the last indexed offset."""
        relative = offset - self.base_offset
        if self._offsets and relative <= self._offsets[-1]:
            return
        self._offsets.append(relative)
        self._positions.append(position)
        self._write_entry(_OFFSET_ENTRY.pack(relative, position))

    def lookup(self, target: int) -> tuple[int, int]:
        """The entry with the largest offset <= target, or (base_offset, 0) if there is none."""
        i = bisect.bisect_right(self._offsets, target - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        keep = bisect.bisect_left(self._offsets, offset - self.base_offset)
        if keep < len(self._offsets):
            del self._offsets[keep:]
            del self._positions[keep:]
            self._truncate_file(keep)

    def reset(self) -> None:
        """Remove every entry."""
        self._offsets = array("i")
        self._positions = array("i")
        self._truncate_file(0)


class TimeIndex(_IndexFile):
    """Maps timestamps to offsets: (max timestamp so far, relative offset) pairs."""

    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        super().__init__(path, base_offset, max_entries)
        self._timestamps: array[int] = array("q")
        self._offsets: array[int] = array("i")

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base_offset) when empty."""
        if not self._offsets:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def entries(self) -> list[tuple[int, int]]:
        """All entries as (timestamp, absolute offset)."""
        return [(t, self.base_offset + o) for t, o in zip(self._timestamps, self._offsets)]

    def load(self, next_offset_bound: int | None = None) -> None:
        """Read the file and sanity-check it."""
        data = self._read_file()
        count = len(data) // self.entry_size
        timestamps: array[int] = array("q")
        offsets: array[int] = array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            timestamps.append(ts)
            offsets.append(rel)
        if count:
            if timestamps[-1] < timestamps[0] or offsets[-1] < offsets[0] or offsets[0] < 0:
                raise IndexCorruptError(f"{self.path} entries are not increasing")
            if (
                next_offset_bound is not None
                and self.base_offset + offsets[-1] >= next_offset_bound
            ):
                raise IndexCorruptError(f"{self.path} points past the end of its log")
        self._timestamps, self._offsets = timestamps, offsets

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add an entry if `timestamp` is larger than the last entry's (and there is room)."""
        if not skip_full_check and self.is_full:
            return
        relative = offset - self.base_offset
        if self._offsets and (timestamp <= self._timestamps[-1] or relative < self._offsets[-1]):
            return
        if timestamp < 0:
            return
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        self._write_entry(_TIME_ENTRY.pack(timestamp, relative))

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= target, or (-1, base_offset) if there is none."""
        i = bisect.bisect_right(self._timestamps, target_timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self.base_offset + self._offsets[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        keep = bisect.bisect_left(self._offsets, offset - self.base_offset)
        if keep < len(self._offsets):
            del self._timestamps[keep:]
            del self._offsets[keep:]
            self._truncate_file(keep)

    def reset(self) -> None:
        """Remove every entry."""
        self._timestamps = array("q")
        self._offsets = array("i")
        self._truncate_file(0)
