"""Sparse segment indexes in Kafka's on-disk formats, held in memory as `array`s.

`OffsetIndex` (`.index`): 8-byte entries `relative_offset int32, position int32`, big-endian; an
entry maps the last offset of a batch to the file position where that batch starts. Entries are
added every index.interval.bytes of appended data, so a lookup lands at most that many bytes
before the batch sought, and the reader scans headers forward from there.

`TimeIndex` (`.timeindex`): 12-byte entries `timestamp int64, relative_offset int32`; an entry says
"the largest timestamp seen so far in this segment is `timestamp`, first reached in the batch ending
at `offset`". Timestamps strictly increase between entries.

The entries live in memory; the file is written when the segment is flushed (`flush`: the entries
added since the last flush are written at their place and the file is fsynced), truncated with the
segment, and read back on load. No descriptor is held between flushes, so thousands of idle
segments cost no file descriptors. An entry not yet flushed is lost by a crash, which is harmless:
every segment holding offsets at or after the recovery point (the only ones with unflushed
entries) has its indexes rebuilt by recovery after an unclean shutdown.

On load a file must pass Kafka's sanity checks and a little more: size a multiple of the entry
size, every entry increasing, the last position inside the segment's log. A file that fails
raises `IndexCorruptError` and the segment rebuilds it by scanning its log.
"""

from __future__ import annotations

import bisect
import operator
import os
import sys
from array import array
from pathlib import Path


class IndexCorruptError(Exception):
    """An index file is malformed or inconsistent with its segment."""


class _IndexFile:
    """The file side of an index: entries persisted by `flush`, plus rename/delete/truncate.

    `_persisted` counts the entries known to be in the file; entries past it are written by the
    next flush. A failed write leaves `_persisted` where it was, so the next flush writes the same
    entries again at the same place.
    """

    entry_size = 0

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._persisted = 0
        self._file_dirty = True
        """The file may differ from the persisted entries: not written yet (a new index) or holding
        bytes past them (an index being rebuilt, a truncation that failed)."""

    def __len__(self) -> int:
        raise NotImplementedError

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

    def _encode(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    @property
    def has_unflushed_entries(self) -> bool:
        return self._persisted != len(self) or self._file_dirty

    def flush(self) -> None:
        """Write the entries added since the last flush and fsync the file; raises OSError."""
        count = len(self)
        if self._persisted == count and not self._file_dirty:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            start = min(self._persisted, count)
            data = self._encode(start, count)
            position = start * self.entry_size
            view = memoryview(data)
            while view:
                written = os.pwrite(fd, view, position)
                view = view[written:]
                position += written
            os.ftruncate(fd, count * self.entry_size)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._persisted = count
        self._file_dirty = False

    def _truncated(self, entries: int) -> None:
        """The in-memory entries were cut to `entries`: cut the file too if it holds more."""
        if self._persisted <= entries:
            return
        self._persisted = entries
        try:
            os.truncate(self.path, entries * self.entry_size)
        except FileNotFoundError:
            pass
        except OSError:
            self._file_dirty = True  # the next flush cuts it

    def close(self) -> None:
        """Nothing to release: no descriptor is held between flushes."""

    def rename_to(self, path: Path) -> None:
        """Rename the index file (e.g. to `.deleted`)."""
        try:
            os.replace(self.path, path)
        except FileNotFoundError:
            pass
        self.path = path

    def delete(self) -> None:
        """Unlink the file."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _big_endian(arr: array[int]) -> array[int]:
    if sys.byteorder == "little":
        arr.byteswap()
    return arr


def _interleave(timestamps: bytes, offsets: bytes) -> bytes:
    """Time index entries from their big-endian columns (8-byte timestamps, 4-byte offsets): each
    entry is three 4-byte words, filled by three strided copies rather than a pack per entry."""
    words = array("i", timestamps)
    out: array[int] = array("i", bytes(len(timestamps) + len(offsets)))
    out[0::3] = words[0::2]
    out[1::3] = words[1::2]
    out[2::3] = array("i", offsets)
    return out.tobytes()


def _deinterleave(data: bytes) -> tuple[bytes, bytes]:
    """The inverse of `_interleave`: the (timestamps, offsets) columns of time index entries."""
    words = array("i", data)
    timestamps: array[int] = array("i", bytes(len(data) // 3 * 2))
    timestamps[0::2] = words[0::3]
    timestamps[1::2] = words[1::3]
    return timestamps.tobytes(), words[2::3].tobytes()


def _strictly_increasing(values: array[int]) -> bool:
    return all(map(operator.lt, values, values[1:]))


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

    def _encode(self, start: int, end: int) -> bytes:
        raw: array[int] = array("i", bytes(8 * (end - start)))
        raw[0::2] = self._offsets[start:end]  # interleaved by strided copies, not entry by entry
        raw[1::2] = self._positions[start:end]
        return _big_endian(raw).tobytes()

    def load(self, log_size: int) -> None:
        """Read the file and sanity-check it against the segment's log size."""
        data = self._read_file()
        raw = _big_endian(array("i", data))
        offsets, positions = raw[0::2], raw[1::2]
        if offsets:
            if offsets[0] < 0 or positions[0] < 0:
                raise IndexCorruptError(f"{self.path} has a negative entry")
            if not (_strictly_increasing(offsets) and _strictly_increasing(positions)):
                raise IndexCorruptError(f"{self.path} entries are not increasing")
            if positions[-1] >= log_size:
                raise IndexCorruptError(f"{self.path} points past the end of its log ({log_size})")
        self._offsets, self._positions = offsets, positions
        self._persisted = len(offsets)
        self._file_dirty = False

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ignored unless `offset` is past the last indexed offset."""
        relative = offset - self.base_offset
        if self._offsets and relative <= self._offsets[-1]:
            return
        self._offsets.append(relative)
        self._positions.append(position)

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
        self._truncated(keep)

    def reset(self) -> None:
        """Remove every entry (the file is rewritten by the next flush)."""
        self._offsets = array("i")
        self._positions = array("i")
        self._persisted = 0
        self._file_dirty = True


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

    def _encode(self, start: int, end: int) -> bytes:
        return _interleave(
            _big_endian(self._timestamps[start:end]).tobytes(), _big_endian(self._offsets[start:end]).tobytes()
        )

    def load(self, next_offset_bound: int | None = None) -> None:
        """Read the file and sanity-check it (`next_offset_bound`: one past the segment's last
        offset, when known)."""
        timestamp_bytes, offset_bytes = _deinterleave(self._read_file())
        timestamps = _big_endian(array("q", timestamp_bytes))
        offsets = _big_endian(array("i", offset_bytes))
        if offsets:
            if offsets[0] < 0 or timestamps[0] < 0:
                raise IndexCorruptError(f"{self.path} has a negative entry")
            if not _strictly_increasing(timestamps) or not all(map(operator.le, offsets, offsets[1:])):
                raise IndexCorruptError(f"{self.path} entries are not increasing")
            if (
                next_offset_bound is not None
                and self.base_offset + offsets[-1] >= next_offset_bound
            ):
                raise IndexCorruptError(f"{self.path} points past the end of its log")
        self._timestamps, self._offsets = timestamps, offsets
        self._persisted = len(offsets)
        self._file_dirty = False

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
        self._truncated(keep)

    def reset(self) -> None:
        """Remove every entry (the file is rewritten by the next flush)."""
        self._timestamps = array("q")
        self._offsets = array("i")
        self._persisted = 0
        self._file_dirty = True
